package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// logStore implements raft.LogStore and raft.StableStore on one badger
// database opened with SyncWrites, so every StoreLogs/Set is durable when it
// returns. Safe for concurrent use (badger transactions). It was the raft
// log of versions before raft-wal (raftlog.go); it is now opened only to
// move such a node's log (moveBadgerLog), and by tests that make one.
//
// Keys: "l" + 8-byte big-endian index -> encoded raft.Log;
// "s" + key -> stable value (SetUint64 stores 8 bytes big-endian).
type logStore struct {
	db *badger.DB
}

var (
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

const (
	logPrefix    = 'l'
	stablePrefix = 's'
)

func logKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = logPrefix
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func stableKey(key []byte) []byte { return append([]byte{stablePrefix}, key...) }

// FirstIndex returns the first stored index, 0 for an empty log.
func (s *logStore) FirstIndex() (uint64, error) { return s.edgeIndex(false) }

// LastIndex returns the last stored index, 0 for an empty log.
func (s *logStore) LastIndex() (uint64, error) { return s.edgeIndex(true) }

func (s *logStore) edgeIndex(reverse bool) (uint64, error) {
	var idx uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: reverse, Prefix: []byte{logPrefix}})
		defer it.Close()
		seek := []byte{logPrefix}
		if reverse {
			seek = []byte{logPrefix, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}
		it.Seek(seek)
		if it.Valid() {
			idx = binary.BigEndian.Uint64(it.Item().Key()[1:])
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("raftfsm: log index: %w", err)
	}
	return idx, nil
}

// contiguousTail returns the first and last index of the run of entries
// without a gap that ends at the last index; 0, 0 for an empty log.
func (s *logStore) contiguousTail() (lo, hi uint64, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{logPrefix}})
		defer it.Close()
		for it.Seek([]byte{logPrefix, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); it.Valid(); it.Next() {
			idx := binary.BigEndian.Uint64(it.Item().Key()[1:])
			if hi != 0 && idx != lo-1 {
				break
			}
			if hi == 0 {
				hi = idx
			}
			lo = idx
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("raftfsm: log indexes: %w", err)
	}
	return lo, hi, nil
}

// eachStable calls fn with every stable key (without its prefix) and value.
func (s *logStore) eachStable(fn func(k, v []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte{stablePrefix}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(it.Item().KeyCopy(nil)[1:], v); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetLog reads the entry at index into out, raft.ErrLogNotFound when absent.
func (s *logStore) GetLog(index uint64, out *raft.Log) error {
	return s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(index))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return raft.ErrLogNotFound
		}
		if err != nil {
			return fmt.Errorf("raftfsm: get log %d: %w", index, err)
		}
		return item.Value(func(v []byte) error { return decodeLog(v, out) })
	})
}

// StoreLog stores one entry durably.
func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries durably; a batch too large for one badger
// transaction is split over several.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, l := range logs {
		e := badger.NewEntry(logKey(l.Index), encodeLog(l))
		err := txn.SetEntry(e)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("raftfsm: store logs: %w", err)
			}
			txn = s.db.NewTransaction(true)
			err = txn.SetEntry(e)
		}
		if err != nil {
			return fmt.Errorf("raftfsm: store log %d: %w", l.Index, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("raftfsm: store logs: %w", err)
	}
	return nil
}

// DeleteRange deletes entries min..max inclusive.
func (s *logStore) DeleteRange(min, max uint64) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i := min; i <= max; i++ {
		if err := wb.Delete(logKey(i)); err != nil {
			return fmt.Errorf("raftfsm: delete logs %d-%d: %w", min, max, err)
		}
		if i == max { // max may be the largest uint64
			break
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("raftfsm: delete logs %d-%d: %w", min, max, err)
	}
	return nil
}

// Set stores a stable key durably.
func (s *logStore) Set(key, val []byte) error {
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(stableKey(key), val) })
	if err != nil {
		return fmt.Errorf("raftfsm: stable set %q: %w", key, err)
	}
	return nil
}

// Get returns a stable key's value; raft expects an error "not found" for
// missing keys, and an empty value is treated the same by raft.
func (s *logStore) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(stableKey(key))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftfsm: stable get %q: %w", key, err)
	}
	return val, nil
}

// errNotFound is the message raft checks for on a missing stable key.
var errNotFound = errors.New("not found")

// SetUint64 stores a uint64 stable value.
func (s *logStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a uint64 stable value, 0 when missing.
func (s *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if errors.Is(err, errNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftfsm: stable %q: %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Log entry encoding: index u64 | term u64 | type u8 | appended-at unix nanos
// i64 | uvarint len + data | uvarint len + extensions.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 25+2*binary.MaxVarintLen64+len(l.Data)+len(l.Extensions))
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

var errBadLog = errors.New("raftfsm: corrupt log entry")

func decodeLog(b []byte, l *raft.Log) error {
	if len(b) < 25 {
		return errBadLog
	}
	l.Index = binary.BigEndian.Uint64(b)
	l.Term = binary.BigEndian.Uint64(b[8:])
	l.Type = raft.LogType(b[16])
	l.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(b[17:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := b[25:]
	var err error
	if l.Data, rest, err = readBytes(rest); err != nil {
		return err
	}
	if l.Extensions, rest, err = readBytes(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return errBadLog
	}
	return nil
}

// readBytes reads a uvarint-prefixed byte string, copying it (badger values
// are only valid inside their transaction).
func readBytes(b []byte) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, errBadLog
	}
	if n == 0 {
		return nil, b[w:], nil
	}
	out := make([]byte, n)
	copy(out, b[w:w+int(n)])
	return out, b[w+int(n):], nil
}
