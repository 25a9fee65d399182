package broker

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// A follower goes on fetching the partitions it has checked while it asks
// a leader about more partitions' epochs than one request holds (issue
// 19: after a kill -9 at 300,000 partitions a survivor spent 6.5 s asking
// the other about the 100,000 partitions it now led, fetched nothing from
// it meanwhile, and the acks=all writes to the partitions that leader had
// led all along timed out at 10 s). Here t-0 is checked and has a record
// to fetch; t-1 to t-3 need asking, more than a request's 2, and the
// leader holds its epoch answers: the round must still fetch t-0. Once
// the answers come, the others are fetched too, from where they were.
func TestFollowerFetchesWhileAskingEpochs(t *testing.T) {
	const n = 4
	leader := &fakeLeader{holdEpochs: make(chan struct{}), requests: make(chan *kmsg.FetchRequest, 16)}
	parts := map[*Partition]*followState{}
	var follower []*Partition
	for i := range int32(n) {
		fp := movedFollower(t, leader, i)
		parts[fp] = &followState{truncated: i == 0}
		follower = append(follower, fp)
	}
	leader.p = leader.others[0]
	if _, err := leader.others[0].append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("new"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	m := newFetchManager(2, func(context.Context, int32) (net.Conn, error) {
		client, server := net.Pipe()
		go leader.serve(t, server)
		t.Cleanup(func() { client.Close() })
		return client, nil
	}, nil, slog.New(slog.DiscardHandler))
	m.applyWait = time.Hour
	f := testFetcher(m, 1, parts)
	f.asksPerRequest = 2
	conn := connectFake(t, leader)
	released := false
	defer func() {
		if !released {
			close(leader.holdEpochs)
		}
		m.close()
	}()

	// round runs one round and returns the fetch it sent (nil: none in
	// 10 s, the round still waiting for the epochs).
	round := func() *kmsg.FetchRequest {
		t.Helper()
		errc := make(chan error, 1)
		go func() { errc <- f.round(conn) }()
		select {
		case req := <-leader.requests:
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			return req
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
			select { // the leader is told of a fetch before it answers: both may be ready
			case req := <-leader.requests:
				return req
			default:
				return nil // a round with nothing to fetch
			}
		case <-time.After(10 * time.Second):
			return nil
		}
	}
	req := round()
	if req == nil {
		t.Fatal("no fetch in 10 s while the leader held its epoch answers: the round waited for them")
	}
	if got := listed(req); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fetch while asking epochs lists %v, want only t-0 at offset 2", got)
	}

	close(leader.holdEpochs)
	released = true
	deadline := time.Now().Add(30 * time.Second)
	seen := map[int32]int64{}
	for len(seen) < n-1 && time.Now().Before(deadline) {
		waitSettled(t, follower)
		if req := round(); req != nil {
			for i, off := range listed(req) {
				if i != 0 {
					seen[i] = off
				}
			}
		}
	}
	for i := int32(1); i < n; i++ {
		if off, ok := seen[i]; !ok || off != 2 {
			t.Fatalf("after the epoch answers, t-%d fetched from %d (listed %v), want from 2", i, off, ok)
		}
	}
	if got := leader.epochAsks.Load(); got != 2 {
		t.Fatalf("%d OffsetForLeaderEpoch requests for 3 partitions at 2 a request, want 2", got)
	}
}

// movedFollower makes partition i of leader (two records written at
// leader epoch 1, leading at epoch 2 now) and its follower, which holds
// both records and has just seen epoch 2: its log is to be checked
// against the leader's epochs again. It returns the follower.
func movedFollower(t *testing.T, leader *fakeLeader, i int32) *Partition {
	t.Helper()
	lp := epochTestPartitionAt(t, i, 1)
	lead(t, lp, 1, "v", 2)
	leader.others = append(leader.others, lp)
	fp := epochTestPartitionAt(t, i, 2)
	follow(fp, 1, 1)
	replicate(t, lp, fp)
	follow(fp, 1, 2) // a new leader epoch: check the log again
	lp.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
	return fp
}

// waitSettled waits until no partition of ps is being applied.
func waitSettled(t *testing.T, ps []*Partition) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ps {
		for p.applying.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("t-%d still being applied after 30 s", p.index)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
