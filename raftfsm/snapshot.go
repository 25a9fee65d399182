package raftfsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// Snapshot format (what raft stores and ships to followers):
//
//	"RNLSNAP1" | applied index u64 BE
//	records: uvarint len(key) | key | uvarint len(val) | val   (len(key) > 0)
//	end: uvarint 0 | CRC-32C (Castagnoli) u32 BE of every byte before it
//
// The records are the badger state read in one read-only transaction, so a
// snapshot is consistent while Apply goes on concurrently with Persist.
const snapMagic = "RNLSNAP1"

var (
	errBadSnapshot = errors.New("raftfsm: corrupt snapshot")
	castagnoli     = crc32.MakeTable(crc32.Castagnoli)
)

type fsmSnapshot struct {
	txn     *badger.Txn
	applied uint64
}

func (f *FSM) snapshot() (raft.FSMSnapshot, error) {
	// Called on the FSM goroutine: txn and applied index agree. Stopped
	// (failstop.go), raft's applied index is past the state's: a snapshot
	// would say it holds commands it does not.
	if err := f.stop.failure(); err != nil {
		return nil, err
	}
	if f.broken != nil {
		return nil, f.broken
	}
	return &fsmSnapshot{txn: f.db.NewTransaction(false), applied: f.applied.Load()}, nil
}

// Persist writes the snapshot to sink; it runs concurrently with Apply.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftfsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w io.Writer) error {
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	hdr := binary.BigEndian.AppendUint64([]byte(snapMagic), s.applied)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	it := s.txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	var rec []byte
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if string(item.Key()) == keyApplied {
			continue // the header carries it
		}
		val, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		rec = binary.AppendUvarint(rec[:0], uint64(len(item.Key())))
		rec = append(rec, item.Key()...)
		rec = binary.AppendUvarint(rec, uint64(len(val)))
		rec = append(rec, val...)
		if _, err := bw.Write(rec); err != nil {
			return err
		}
	}
	if err := bw.WriteByte(0); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Release ends the read transaction.
func (s *fsmSnapshot) Release() { s.txn.Discard() }

// restore replaces the state with the snapshot's, unless this state machine
// has already applied the snapshot's index (raft restores the newest snapshot
// on every start; the badger state is durable and usually ahead of it).
// The records stream from r into badger, one at a time: a snapshot of
// 2,000,000 partitions is never held in memory beside the image loaded
// from it.
func (f *FSM) restore(r io.Reader) error {
	if err := f.stop.failure(); err != nil {
		return err
	}
	sr, applied, err := newSnapshotReader(r)
	if err != nil {
		return err
	}
	if applied <= f.applied.Load() {
		f.log.Debug("raftfsm: state already past snapshot", "snapshot", applied, "applied", f.applied.Load())
		return nil
	}
	// From here the state store is being replaced: until a restore
	// completes, the FSM applies nothing (raft retries the snapshot, or
	// the node fails to start and restores it again on the next start).
	if err := checkDiskRoom(f.db.Opts().Dir); err != nil {
		// Before anything is replaced: the state stays as it was.
		f.storeFailed(fmt.Errorf("raftfsm: restore a snapshot: %w", err))
		return err
	}
	f.broken = fmt.Errorf("raftfsm: a snapshot restore did not complete")
	if err := streamState(f.db, applied, sr); err != nil {
		f.broken = fmt.Errorf("raftfsm: snapshot restore failed: %w", err)
		if !errors.Is(err, errBadSnapshot) {
			// Not the snapshot but the state store: raft would retry
			// the restore for ever, the metadata frozen.
			f.storeFailed(fmt.Errorf("raftfsm: write the state store from a snapshot: %w", err))
		}
		return err
	}
	img, idx, err := loadImage(f.db)
	if err != nil {
		f.broken = err
		return err
	}
	f.broken = nil
	f.applied.Store(idx)
	f.images.publish(img)
	f.log.Info("raftfsm: restored snapshot", "index", idx, "topics", img.Topics.Len(), "brokers", len(img.Brokers))
	return nil
}

// snapshotReader reads a snapshot: the header first, so that a snapshot the
// state has passed is not read further.
type snapshotReader struct {
	br  *bufio.Reader
	tr  io.Reader // br, checksummed into crc
	crc hash.Hash32
}

func newSnapshotReader(r io.Reader) (*snapshotReader, uint64, error) {
	crc := crc32.New(castagnoli)
	br := bufio.NewReader(r)
	sr := &snapshotReader{br: br, tr: io.TeeReader(br, crc), crc: crc}
	hdr := make([]byte, len(snapMagic)+8)
	if _, err := io.ReadFull(sr.tr, hdr); err != nil || string(hdr[:len(snapMagic)]) != snapMagic {
		return nil, 0, fmt.Errorf("%w: bad header", errBadSnapshot)
	}
	return sr, binary.BigEndian.Uint64(hdr[len(snapMagic):]), nil
}

// each calls fn with every record (fresh slices fn may keep) as it is
// read, then checks the trailing checksum.
func (sr *snapshotReader) each(fn func(key, val []byte) error) error {
	bre := byteReader{sr.tr}
	for {
		key, err := readChunk(bre, sr.tr)
		if err != nil {
			return err
		}
		if key == nil {
			break
		}
		val, err := readChunk(bre, sr.tr)
		if err != nil {
			return err
		}
		if val == nil {
			val = []byte{}
		}
		if err := fn(key, val); err != nil {
			return err
		}
	}
	want := sr.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(sr.br, sum[:]); err != nil || binary.BigEndian.Uint32(sum[:]) != want {
		return fmt.Errorf("%w: checksum", errBadSnapshot)
	}
	return nil
}

// maxChunk bounds one key or value in a snapshot.
const maxChunk = 64 << 20

// readChunk reads a uvarint-prefixed chunk; nil for a zero length.
func readChunk(br io.ByteReader, r io.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxChunk {
		return nil, fmt.Errorf("%w: bad length", errBadSnapshot)
	}
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: truncated", errBadSnapshot)
	}
	return b, nil
}

type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var p [1]byte
	_, err := io.ReadFull(b.r, p[:])
	return p[0], err
}

// streamState swaps the whole badger state for the snapshot's records,
// read one at a time. The applied index is removed first and written
// last, after the snapshot's checksum is checked, so a crash or a corrupt
// snapshot in between leaves no applied index and raft restores a
// snapshot again.
func streamState(db *badger.DB, applied uint64, sr *snapshotReader) error {
	err := db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyApplied)) })
	if err != nil {
		return fmt.Errorf("raftfsm: restore: %w", err)
	}
	if err := clearState(db); err != nil {
		return fmt.Errorf("raftfsm: restore: clear state: %w", err)
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	err = sr.each(func(key, val []byte) error {
		if string(key) == keyApplied {
			return fmt.Errorf("%w: %s among the records", errBadSnapshot, keyApplied)
		}
		return wb.Set(key, val)
	})
	if err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("raftfsm: restore: %w", err)
	}
	return commitWrites(db, applied, nil)
}

// clearState deletes every key (a write batch of its own, flushed before
// the snapshot's records are written).
func clearState(db *badger.DB) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}
