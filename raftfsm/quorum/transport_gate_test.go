package quorum

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A heartbeat handler still running when the node closes must finish before
// drain returns (the stores close right after), and a heartbeat arriving
// after drain never reaches raft.
func TestGatedTransportDrainWaitsForHeartbeats(t *testing.T) {
	newTCP := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	leader := newTCP()
	follower := newGatedTransport(newTCP())

	started := make(chan struct{}, 4)
	release := make(chan struct{})
	calls := 0
	follower.SetHeartbeatHandler(func(rpc raft.RPC) {
		calls++
		started <- struct{}{}
		<-release
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	heartbeat := func() error {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(leader.LocalAddr())},
			Term:      7,
		}
		var resp raft.AppendEntriesResponse
		return leader.AppendEntries("2", follower.LocalAddr(), req, &resp)
	}

	first := make(chan error, 1)
	go func() { first <- heartbeat() }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("heartbeat handler never ran")
	}
	drained := make(chan struct{})
	go func() { follower.drain(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("drain returned while a heartbeat handler was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not return after the handler finished")
	}
	if err := <-first; err != nil {
		t.Fatalf("first heartbeat: %v", err)
	}
	if err := heartbeat(); err == nil {
		t.Fatal("a heartbeat after drain was answered as if raft handled it")
	}
	if calls != 1 {
		t.Fatalf("handler ran %d times, want 1 (none after drain)", calls)
	}
}
