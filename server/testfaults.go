package server

// Test-only faults for the chaos suite (issue 20), off unless
// --test-faults: a wall-clock offset and an fsync delay.
//
// A Go binary reads the clock through the vDSO, so LD_PRELOAD clock fakes
// never reach it, and a real clock step would move every process on the
// machine. The node therefore reads the wall clock through testFaults.now
// wherever wall time is stored or compared with stored wall time (record
// and marker timestamps, retention and segment.ms, producer-id and
// Idempotency-Key expiry, token expiry, group offset and transaction
// timestamps). Durations measured in memory (broker leases and sessions,
// raft timers, request deadlines, UI sessions) keep time.Now: Go measures
// them on the monotonic clock, which a real wall-clock step does not move
// either. With faults on, now returns times without a monotonic reading,
// so a jump shows wherever such a time is used for a duration too: the
// segments' flush.ms and checkpoint spacing share the log's clock with
// retention, so in tests they follow the offset (in production they see
// time.Now's monotonic reading).
//
// Retention, as in Kafka, compares a segment's newest record timestamp
// with the node's own wall clock: a node whose clock runs ahead deletes
// segments early, by as much as it is ahead, whatever the other replicas'
// clocks say (TestClockJumpRetention).
//
// The file <data-dir>/test-faults, re-read every 100 ms, changes the faults
// while the node runs: lines "clock-offset <duration>" and "fsync-delay
// <duration>" (a missing line or file keeps the value given at start).

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// TestFaults are the test-only fault knobs (hidden flags --test-faults,
// --test-clock-offset, --test-fsync-delay, --test-raft-log-segment-bytes).
type TestFaults struct {
	Enabled     bool
	ClockOffset time.Duration // added to the wall clock
	FsyncDelay  time.Duration // every partition fsync sleeps this long first
	// RaftLogSegmentBytes is the metadata log's segment size (0: quorum's
	// default), with or without Enabled: small segments rotate after a few
	// entries, so a test reaches a rotation that fails on a full disk
	// (TestMetadataLogFullDiskExits).
	RaftLogSegmentBytes int
}

// TestFaultsFile is the name, in the data dir, of the file that changes the
// faults of a running node.
const TestFaultsFile = "test-faults"

// testFaults holds the current faults; a nil *testFaults is "off" and
// costs nothing.
type testFaults struct {
	file        string
	start       TestFaults
	clockOffset atomic.Int64 // ns
	fsyncDelay  atomic.Int64 // ns
	stop        context.CancelFunc
	wg          sync.WaitGroup
}

func newTestFaults(cfg TestFaults, dataDir string) *testFaults {
	if !cfg.Enabled {
		return nil
	}
	f := &testFaults{file: filepath.Join(dataDir, TestFaultsFile), start: cfg}
	f.clockOffset.Store(int64(cfg.ClockOffset))
	f.fsyncDelay.Store(int64(cfg.FsyncDelay))
	f.reload()
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f.reload()
			}
		}
	}()
	return f
}

// close stops the file watcher.
func (f *testFaults) close() {
	if f != nil {
		f.stop()
		f.wg.Wait()
	}
}

// reload applies the faults file; unparsable lines are ignored (a test
// writes the file, and rewrites it whole).
func (f *testFaults) reload() {
	clock, fsync := f.start.ClockOffset, f.start.FsyncDelay
	raw, err := os.ReadFile(f.file)
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				continue
			}
			switch k {
			case "clock-offset":
				clock = d
			case "fsync-delay":
				fsync = d
			}
		}
	}
	f.clockOffset.Store(int64(clock))
	f.fsyncDelay.Store(int64(fsync))
}

// now is the node's wall clock: time.Now when faults are off, else the
// time shifted by the clock offset, without a monotonic reading.
func (f *testFaults) now() time.Time {
	if f == nil {
		return time.Now()
	}
	return time.Now().Add(time.Duration(f.clockOffset.Load())).Round(0)
}

// fs is the partitions' filesystem: the OS's, with the fsync delay when
// faults are on.
func (f *testFaults) fs() vfs.FS {
	if f == nil {
		return nil
	}
	return vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir || op == vfs.OpSyncFS {
			if d := time.Duration(f.fsyncDelay.Load()); d > 0 {
				time.Sleep(d)
			}
		}
		return nil
	})
}
