package quorum

import (
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

func newTestLogStore(t *testing.T) *logStore {
	t.Helper()
	db, err := raftfsm.OpenBadger(t.TempDir(), true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &logStore{db: db}
}

func testLog(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: i / 3, Type: raft.LogCommand, Data: []byte{byte(i)},
		AppendedAt: time.Unix(0, int64(i)*1000)}
}

func TestLogStore(t *testing.T) {
	s := newTestLogStore(t)
	check := func(first, last uint64) {
		t.Helper()
		f, err1 := s.FirstIndex()
		l, err2 := s.LastIndex()
		if err1 != nil || err2 != nil || f != first || l != last {
			t.Fatalf("first %d last %d (%v %v), want %d %d", f, l, err1, err2, first, last)
		}
	}
	check(0, 0)
	var batch []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		batch = append(batch, testLog(i))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(testLog(301)); err != nil {
		t.Fatal(err)
	}
	check(1, 301)
	var got raft.Log
	if err := s.GetLog(256, &got); err != nil || !reflect.DeepEqual(&got, testLog(256)) {
		t.Fatalf("get 256: %+v %v", got, err)
	}
	if err := s.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	check(101, 301)
	if err := s.GetLog(100, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v", err)
	}
	if err := s.DeleteRange(250, 301); err != nil { // a suffix, as on conflict
		t.Fatal(err)
	}
	check(101, 249)
}

func TestStableStore(t *testing.T) {
	s := newTestLogStore(t)
	if v, err := s.GetUint64([]byte("term")); err != nil || v != 0 {
		t.Fatalf("missing uint64: %d %v", v, err)
	}
	if _, err := s.Get([]byte("x")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err) // raft matches this message
	}
	if err := s.SetUint64([]byte("term"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("x"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	v, err := s.GetUint64([]byte("term"))
	b, err2 := s.Get([]byte("x"))
	if err != nil || err2 != nil || v != 7 || string(b) != "y" {
		t.Fatalf("got %d %q (%v %v)", v, b, err, err2)
	}
	// Stable keys and log entries do not mix.
	if err := s.StoreLog(testLog(5)); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FirstIndex(); f != 5 {
		t.Fatalf("first index %d", f)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(testLog(3)))
	f.Add(encodeLog(&raft.Log{Index: 1, Type: raft.LogNoop}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if decodeLog(b, &l) != nil {
			return
		}
		var again raft.Log
		if err := decodeLog(encodeLog(&l), &again); err != nil || !reflect.DeepEqual(l, again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, l, again)
		}
	})
}

// BenchmarkStoreLog is the baseline for BenchmarkApplySingleNode: one durable
// badger write of a small entry.
func BenchmarkStoreLog(b *testing.B) {
	db, err := raftfsm.OpenBadger(b.TempDir(), true, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := &logStore{db: db}
	var i uint64
	for b.Loop() {
		i++
		if err := s.StoreLog(testLog(i)); err != nil {
			b.Fatal(err)
		}
	}
}
