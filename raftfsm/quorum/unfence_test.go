package quorum

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// RegisterBroker's wait for the unfencing ends at the heartbeat answer
// that gives the broker its lease, not a heartbeat interval later (issue
// 19). The image that unfences the broker is published before that answer
// sets the lease; waitUnfenced, woken by the image and finding no lease
// yet, used to wait for the next image or the interval: 2 s in about half
// the restarts of a node with a million partitions, an hour here.
func TestWaitUnfencedWakesAtLease(t *testing.T) {
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: testport.FreeAddr(t),
		HeartbeatInterval: time.Hour, SessionTimeout: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// A new cluster raises its command version once: no image follows
	// that this test does not write.
	for {
		img, changed := n.Image()
		if img.CommandVersion >= raftfsm.CommandVersion {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("command version never raised")
		}
	}
	// Registered, no heartbeats: this test answers in their place.
	b, err := n.register(ctx, raftfsm.RegisterBroker{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: 1, Epoch: b.Epoch, State: raftfsm.BrokerAlive}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := n.waitUnfenced(ctx, b)
		done <- err
	}()
	// The image shows the broker unfenced; once waitUnfenced waits (it
	// found no lease), the heartbeat's answer sets one.
	for !waiting("waitUnfenced") {
		select {
		case err := <-done:
			t.Fatalf("waitUnfenced returned before the broker had a lease: %v", err)
		case <-ctx.Done():
			t.Fatal("waitUnfenced never waited")
		case <-time.After(time.Millisecond):
		}
	}
	n.q.hbMu.Lock()
	n.setLeaseLocked(time.Now().Add(time.Hour))
	n.q.hbMu.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("waitUnfenced after the lease was set: %v, want it to return at once", err)
	}
}

// waiting reports whether a goroutine is blocked in a select inside fn.
func waiting(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "."+fn+"(") {
			return true
		}
	}
	return false
}
