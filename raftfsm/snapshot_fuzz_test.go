package raftfsm

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
)

func FuzzReadSnapshot(f *testing.F) {
	src := newFSMForFuzz(f)
	f.Add(src)
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, recs, err := readSnapshot(bytes.NewReader(b))
		if err == nil {
			for _, r := range recs {
				if r.key == "" {
					t.Fatal("empty key decoded")
				}
			}
		}
	})
}

// newFSMForFuzz returns a valid snapshot as a seed.
func newFSMForFuzz(f *testing.F) []byte {
	s := &fsmSnapshot{applied: 3}
	db, err := OpenBadger(f.TempDir(), false, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	if err := commitWrites(db, 3, []write{{topicKey("a"), []byte(`{"Name":"a"}`)}}); err != nil {
		f.Fatal(err)
	}
	s.txn = db.NewTransaction(false)
	defer s.Release()
	var buf bytes.Buffer
	if err := s.write(&buf); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// readSnapshot reads and checks a whole snapshot (what the fuzz target checks).
func readSnapshot(r io.Reader) (uint64, []write, error) {
	sr, applied, err := newSnapshotReader(r)
	if err != nil {
		return 0, nil, err
	}
	recs, err := sr.records()
	return applied, recs, err
}

// records reads the records and checks the trailing checksum.
func (sr *snapshotReader) records() ([]write, error) {
	var recs []write
	err := sr.each(func(key, val []byte) error {
		recs = append(recs, write{string(key), val})
		return nil
	})
	return recs, err
}
