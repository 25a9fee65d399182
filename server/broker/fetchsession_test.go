package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/replfetch"
)

func listed(req *kmsg.FetchRequest) map[int32]int64 {
	out := map[int32]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.FetchOffset
		}
	}
	return out
}

// A follower fetches in a KIP-227 session: once the leader granted one, a
// fetch lists only the partitions whose position changed and forgets
// those it stopped fetching, so an idle follower's fetch carries no
// partition at all (issue 19: every fetch listed every followed
// partition, 10,000 per leader twice a second at 30,000 partitions).
func TestFollowerFetchSessionListsOnlyChanges(t *testing.T) {
	const n = 50
	leader := &fakeLeader{sessionID: 7, requests: make(chan *kmsg.FetchRequest, 10)}
	parts := map[*Partition]*followState{}
	byIndex := map[int32]*Partition{}
	for i := range int32(n) {
		log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lp := newPartition("t", i, [16]byte{1}, log, nil)
		lp.repl.self = 1
		t.Cleanup(func() { lp.close() })
		lp.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
		leader.others = append(leader.others, lp)
		fp := epochTestPartitionAt(t, i, 2)
		follow(fp, 1, 1)
		parts[fp] = &followState{truncated: true}
		byIndex[i] = fp
	}
	leader.p = leader.others[0]
	m := testFetchManager(t, 2)
	f := testFetcher(m, 1, parts)
	conn := connectFake(t, leader)
	round := func() *kmsg.FetchRequest {
		t.Helper()
		if err := f.round(conn); err != nil {
			t.Fatal(err)
		}
		return <-leader.requests
	}
	if req := round(); len(listed(req)) != n || req.SessionEpoch != 0 {
		t.Fatalf("first fetch lists %d partitions at session epoch %d, want all %d at 0 (opening the session)", len(listed(req)), req.SessionEpoch, n)
	}
	req := round()
	if len(listed(req)) != 0 || req.SessionID != 7 || req.SessionEpoch != 1 {
		t.Fatalf("idle fetch lists %d partitions in session %d epoch %d, want none in session 7 epoch 1", len(listed(req)), req.SessionID, req.SessionEpoch)
	}
	// Partition 3 got records (as from an earlier answer, which wakes
	// it): only it is listed, at its new log end. Partition 5 stops
	// fetching from this leader: forgotten.
	if _, err := byIndex[3].log().Append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}}), 1); err != nil {
		t.Fatal(err)
	}
	byIndex[3].wake()
	f.remove(byIndex[5])
	req = round()
	if got := listed(req); len(got) != 1 || got[3] != 1 || req.SessionEpoch != 2 {
		t.Fatalf("fetch lists %v at epoch %d, want only partition 3 at offset 1, epoch 2", got, req.SessionEpoch)
	}
	if len(req.ForgottenTopics) != 1 || len(req.ForgottenTopics[0].Partitions) != 1 || req.ForgottenTopics[0].Partitions[0] != 5 {
		t.Fatalf("forgotten %+v, want t-5", req.ForgottenTopics)
	}
	if req := round(); len(listed(req)) != 0 || len(req.ForgottenTopics) != 0 {
		t.Fatalf("idle fetch lists %v and forgets %+v, want nothing", listed(req), req.ForgottenTopics)
	}
}

// epochTestPartitionAt is epochTestPartition with partition index i.
func epochTestPartitionAt(t *testing.T, i, self int32) *Partition {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", i, [16]byte{1}, log, nil)
	p.repl.self = self
	t.Cleanup(func() { p.close() })
	return p
}

// A follower leaves the logs it follows unopened while they hold no record
// (issue 19: it opened every one, so in a replicated cluster lazy logs
// saved nothing: every node held every log open). The first records the
// leader sends open (and create) the log.
func TestFollowerLeavesEmptyLogsUnopened(t *testing.T) {
	const n = 20
	leader := &fakeLeader{sessionID: 9, requests: make(chan *kmsg.FetchRequest, 100)}
	for i := range int32(n) {
		lp := epochTestPartitionAt(t, i, 2)
		lp.setMeta(raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}, 2)
		leader.others = append(leader.others, lp)
	}
	leader.p = leader.others[0]
	dir := t.TempDir()
	b := followingBroker(t, leader, n, Config{DataDir: dir, Files: segments.NewFileCache(16)})
	defer b.Close()
	// Two fetches: the one opening the session (every partition checked
	// against the leader before it) and an idle one.
	for range 2 {
		<-leader.requests
	}
	if dirs := partitionDirs(t, dir); len(dirs) != 0 || len(b.opened()) != 0 {
		t.Fatalf("following %d empty partitions opened %d logs and created directories %v, want none", n, len(b.opened()), dirs)
	}
}

// A follower checks all the partitions it starts following from a leader
// against the leader's epochs in one OffsetForLeaderEpoch request, not one
// round trip each (issue 19: after a leader moved 10,000 partitions, the
// follower spent minutes asking one by one, fetching nothing meanwhile,
// and every partition of that leader fell out of the ISR).
func TestFollowerAsksEpochsInOneRequest(t *testing.T) {
	const n = 30
	leader := &fakeLeader{}
	parts := map[*Partition]*followState{}
	for i := range int32(n) {
		parts[movedFollower(t, leader, i)] = &followState{}
	}
	leader.p = leader.others[0]
	m := testFetchManager(t, 2)
	f := testFetcher(m, 1, parts)
	f.collect()
	if err := f.truncate(connectFake(t, leader)); err != nil {
		t.Fatal(err)
	}
	if got := leader.epochAsks.Load(); got != 1 {
		t.Fatalf("%d OffsetForLeaderEpoch requests for %d partitions, want 1", got, n)
	}
	for p, st := range parts {
		if !st.truncated {
			t.Fatalf("partition %d not checked against the leader", p.index)
		}
	}
}

// A fetch long-polls only when it reports every new position the
// follower has (issue 19): only listed positions move the leader's high
// watermark, and each request of a catch-up too large for one (here the
// session's first, of more partitions than a request lists) waited out the
// leader's whole long poll before the next could report the rest. One left
// with positions still to list asks for no wait; one sent while an answer
// is being applied waits at most replicaBusyFetchWait; one with nothing
// left waits replicaFetchWait.
func TestFollowerFetchWaitsOnlyWithNothingToReport(t *testing.T) {
	perRequest := replfetch.PerRequest("t")
	f, leader, byIndex := idleFollower(t, perRequest+500)
	conn := connectFake(t, leader)
	round := func() *kmsg.FetchRequest {
		t.Helper()
		if err := f.round(conn); err != nil {
			t.Fatal(err)
		}
		return <-leader.requests
	}
	settled := func() { // the answer's applies are done
		t.Helper()
		waitSettled(t, slices.Collect(maps.Values(byIndex)))
	}
	longPoll := int32(replicaFetchWait / time.Millisecond)
	if req := round(); len(listed(req)) != perRequest || req.MaxWaitMillis != 0 {
		t.Fatalf("first fetch lists %d partitions waiting %d ms, want %d waiting 0 ms (500 more to list)", len(listed(req)), req.MaxWaitMillis, perRequest)
	}
	settled()
	if req := round(); len(listed(req)) != 500 || req.MaxWaitMillis != longPoll {
		t.Fatalf("second fetch lists %d waiting %d ms, want the other 500 waiting %d ms", len(listed(req)), req.MaxWaitMillis, longPoll)
	}
	settled()
	busy := byIndex[3]
	busy.applying.Store(true) // as while an answer is applied to it
	f.touch(busy)
	req := round()
	if want := int32(replicaBusyFetchWait / time.Millisecond); req.MaxWaitMillis != want || len(req.ForgottenTopics) != 1 {
		t.Fatalf("fetch with t-3 being applied waits %d ms forgetting %+v, want %d ms forgetting t-3", req.MaxWaitMillis, req.ForgottenTopics, want)
	}
	busy.applying.Store(false)
	f.touch(busy)
	settled()
	if req := round(); fmt.Sprint(listed(req)) != "map[3:0]" || req.MaxWaitMillis != longPoll {
		t.Fatalf("fetch after the apply lists %v waiting %d ms, want t-3 waiting %d ms", listed(req), req.MaxWaitMillis, longPoll)
	}
}
