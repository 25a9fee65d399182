package raftfsm

import (
	"bytes"
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
