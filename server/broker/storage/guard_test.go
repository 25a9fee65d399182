package storage

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// fakeDisk is a filesystem whose free space the test sets.
type fakeDisk struct {
	mu          sync.Mutex
	free, total int64
	err         error
	calls       int
}

func (d *fakeDisk) set(free int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free, d.err = free, err
}

func (d *fakeDisk) statfs(string) (int64, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return d.free, d.total, d.err
}

func guardOn(d *fakeDisk, min int64) *Guard {
	g := NewGuard("/partitions", min)
	g.statfs = d.statfs
	return g
}

// Below the reserve appends are refused with ErrStorage, and admitted
// again once a measure finds the space back. Small appends are admitted
// without a statfs each until CheckBytes add up.
func TestGuardRefusesBelowReserveAndResumes(t *testing.T) {
	d := &fakeDisk{free: 1 << 30, total: 10 << 30}
	g := guardOn(d, 100<<20)
	if err := g.Admit(CheckBytes / 2); err != nil || d.calls != 0 {
		t.Fatalf("first small admit: %v after %d statfs; want admitted without one", err, d.calls)
	}
	d.set(50<<20, nil)
	if err := g.Admit(CheckBytes / 2); err == nil || !errors.Is(err, ErrStorage) || d.calls != 1 {
		t.Fatalf("admit reaching CheckBytes below the reserve: %v after %d statfs; want ErrStorage after one", err, d.calls)
	}
	if !g.IsLow() || g.Err() == nil || !strings.Contains(g.Err().Error(), "--min-free-disk") {
		t.Fatalf("IsLow %v, Err %v; want low, naming the flag", g.IsLow(), g.Err())
	}
	d.set(1<<30, nil)
	g.Measure(true)
	if err := g.Admit(1); err != nil || g.IsLow() || g.Err() != nil {
		t.Fatalf("after space returned: admit %v, low %v, err %v", err, g.IsLow(), g.Err())
	}
}

// The reserve is capped at a tenth of the filesystem, so a small disk is
// not refused whole.
func TestGuardReserveCappedAtATenth(t *testing.T) {
	d := &fakeDisk{free: 600, total: 5000}
	g := guardOn(d, 1000)
	g.Measure(true)
	if g.IsLow() {
		t.Fatalf("600 of 5000 bytes free with a 1000-byte reserve: low; want the reserve capped at 500")
	}
	d.set(499, nil)
	g.Measure(true)
	if !g.IsLow() {
		t.Fatal("499 free below the capped 500: not low")
	}
}

// A failed statfs keeps the last measure (the appends say what is wrong);
// a nil guard, or one without a reserve, admits everything.
func TestGuardStatfsErrorAndNoReserve(t *testing.T) {
	d := &fakeDisk{free: 10, total: 1000}
	g := guardOn(d, 50)
	g.Measure(true)
	if !g.IsLow() {
		t.Fatal("10 of 1000 free with a 50-byte reserve: not low")
	}
	d.set(1000, errors.New("statfs: input/output error"))
	g.Measure(true)
	if !g.IsLow() {
		t.Fatal("a failed statfs cleared the refusal")
	}
	var none *Guard
	none.Measure(true)
	if none.Admit(1<<30) != nil || none.IsLow() || none.Err() != nil {
		t.Fatal("a nil guard refused")
	}
	off := guardOn(d, 0)
	if off.Admit(1<<30) != nil {
		t.Fatal("a guard without a reserve refused")
	}
}
