package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
	"github.com/runnel/runnel/server/broker/replfetch"
	"github.com/runnel/runnel/server/broker/storage"
)

// idleFollower is a fetcher following n empty partitions t-0.. from
// leader 1 (at leader epoch 1), all checked against the leader already,
// and a fake leader granting session 7 that answers every index from one
// empty partition. The logs live in memory.
func idleFollower(tb testing.TB, n int) (*leaderFetcher, *fakeLeader, map[int32]*Partition) {
	tb.Helper()
	files := segments.NewFileCache(16)
	part := func(dir string, i, self int32) *Partition {
		log, err := segments.Open(dir, segments.DefaultConfig(), segments.Options{FS: vfs.NewMemFS(), Files: files})
		if err != nil {
			tb.Fatal(err)
		}
		p := newPartition("t", i, [16]byte{1}, log, nil)
		p.repl.self = self
		tb.Cleanup(func() { p.close() })
		return p
	}
	lp := part("/leader", 0, 1)
	lp.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
	leader := &fakeLeader{p: lp, sessionID: 7, requests: make(chan *kmsg.FetchRequest, 1)}
	states := map[*Partition]*followState{}
	byIndex := map[int32]*Partition{}
	for i := range int32(n) {
		p := part(fmt.Sprintf("/follower/%d", i), i, 2)
		follow(p, 1, 1)
		states[p] = &followState{truncated: true}
		byIndex[i] = p
	}
	m := testFetchManager(tb, 2)
	return testFetcher(m, 1, states), leader, byIndex
}

// A follower's fetch round looks at the partitions that changed since its
// last, not at every partition it follows (issue 19: building each
// request of an idle session looked at all of them, ~60% of an idle
// node's CPU at 30,000 partitions, 3 nodes, RF 3). Here 10,000 idle
// partitions: once the session holds them all, an idle round looks at
// none, and a round after three changed leader epoch, one got records and
// one stopped being followed looks at those five only, lists the four
// and forgets the one.
func TestIdleFetchRoundLooksOnlyAtChanges(t *testing.T) {
	maxFetchPartitions := replfetch.PerRequest("t")
	n := maxFetchPartitions + 2000
	f, leader, byIndex := idleFollower(t, n)
	conn := connectFake(t, leader)
	round := func() (req *kmsg.FetchRequest, looked int) {
		t.Helper()
		before := f.looked
		if err := f.round(conn); err != nil {
			t.Fatal(err)
		}
		return <-leader.requests, f.looked - before
	}
	// The session opens with what one request lists, the next request
	// adds the rest. A round looks again at the partitions of the answer
	// before (this fake answers each one listed): the first request's,
	// then the other 2,000.
	if req, looked := round(); len(listed(req)) != maxFetchPartitions || req.SessionEpoch != 0 || looked != n {
		t.Fatalf("first round lists %d partitions at session epoch %d looking at %d, want %d at 0 looking at all %d",
			len(listed(req)), req.SessionEpoch, looked, maxFetchPartitions, n)
	}
	if req, looked := round(); len(listed(req)) != n-maxFetchPartitions || looked != n {
		t.Fatalf("second round lists %d looking at %d, want the other %d looking at all %d", len(listed(req)), looked, n-maxFetchPartitions, n)
	}
	if req, looked := round(); len(listed(req)) != 0 || looked != n-maxFetchPartitions {
		t.Fatalf("third round lists %d looking at %d, want none looking at the %d answered", len(listed(req)), looked, n-maxFetchPartitions)
	}
	for range 3 {
		if req, looked := round(); len(listed(req)) != 0 || looked != 0 {
			t.Fatalf("idle round lists %d partitions looking at %d, want none", len(listed(req)), looked)
		}
	}

	for _, i := range []int32{10, 20, 30} {
		// A new leader epoch, as reconcile applies it (fetchManager.follow).
		p := byIndex[i]
		follow(p, 1, 2)
		f.add(p)
	}
	// Records applied, as from an answer.
	if err := byIndex[40].appendAsFollower(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}}), 1); err != nil {
		t.Fatal(err)
	}
	f.remove(byIndex[50])
	req, looked := round()
	want := map[int32]int64{10: 0, 20: 0, 30: 0, 40: 1}
	if got := listed(req); looked != 5 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("round after five changes lists %v looking at %d, want %v looking at 5", got, looked, want)
	}
	if len(req.ForgottenTopics) != 1 || fmt.Sprint(req.ForgottenTopics[0].Partitions) != "[50]" {
		t.Fatalf("forgotten %+v, want t-50", req.ForgottenTopics)
	}
	for _, rp := range req.Topics[0].Partitions {
		if epoch := map[int32]int32{10: 2, 20: 2, 30: 2, 40: 1}[rp.Partition]; rp.CurrentLeaderEpoch != epoch {
			t.Errorf("t-%d listed at leader epoch %d, want %d", rp.Partition, rp.CurrentLeaderEpoch, epoch)
		}
	}
	if req, looked := round(); len(listed(req)) != 0 || len(req.ForgottenTopics) != 0 || looked != 4 {
		t.Fatalf("round after lists %d, forgets %+v looking at %d, want nothing looking at the 4 answered", len(listed(req)), req.ForgottenTopics, looked)
	}
	if req, looked := round(); len(listed(req)) != 0 || len(req.ForgottenTopics) != 0 || looked != 0 {
		t.Fatalf("idle round lists %d, forgets %+v looking at %d, want nothing", len(listed(req)), req.ForgottenTopics, looked)
	}
}

// BenchmarkIdleFetchRequest is the follower's cost of an idle session's
// round before it sends (issue 19): collecting what changed, checking
// epochs, building the request; at 1,000 and 100,000 followed partitions.
func BenchmarkIdleFetchRequest(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f, leader, _ := idleFollower(b, n)
			conn := connectFake(b, leader)
			for before := -1; before != f.looked; { // open the session, fill it, apply the answers
				before = f.looked
				if err := f.round(conn); err != nil {
					b.Fatal(err)
				}
				<-leader.requests
			}
			b.ReportAllocs()
			for b.Loop() {
				f.collect()
				if err := f.truncate(nil); err != nil { // nothing to ask: no connection used
					b.Fatal(err)
				}
				if req, _ := f.fetchRequest(); len(req.Topics) != 0 {
					b.Fatalf("idle request lists %d topics", len(req.Topics))
				}
			}
		})
	}
}

// forgets reports whether req tells the leader's session to forget index.
func forgets(req *kmsg.FetchRequest, index int32) bool {
	for _, ft := range req.ForgottenTopics {
		if slices.Contains(ft.Partitions, index) {
			return true
		}
	}
	return false
}

// A follower stops fetching a partition whose log failed in a maintenance
// round (here its time roll: the disk refuses the new segment): the
// session forgets it, so the leader sees this replica fall behind instead
// of counting it in sync. Its fetcher learns of it from the partition's
// wake: with rounds that look only at changed partitions, a failure
// nothing announced left the partition in the session for good.
func TestFollowerForgetsLogFailedInMaintenance(t *testing.T) {
	leader := &fakeLeader{sessionID: 9, requests: make(chan *kmsg.FetchRequest, 1000), quiet: true}
	for i := range int32(2) {
		lp := epochTestPartitionAt(t, i, 2)
		lead(t, lp, 1, "v", 1)
		leader.others = append(leader.others, lp)
	}
	leader.p = leader.others[0]
	var armed atomic.Bool
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if armed.Load() && strings.Contains(path, string(filepath.Separator)+"t-0"+string(filepath.Separator)) &&
			(op == vfs.OpCreate || op == vfs.OpWrite || op == vfs.OpSync || op == vfs.OpRename) {
			return errors.New("injected: disk refuses writes")
		}
		return nil
	})
	b := followingBroker(t, leader, 2, Config{Files: segments.NewFileCache(16), FS: efs})
	defer b.Close()
	p0, err := b.lookup("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Both replicated, then an idle fetch: the session holds both at
	// their log end (held: what the requests listed and did not forget).
	held := map[int32]int64{}
	next := func(what string) *kmsg.FetchRequest {
		t.Helper()
		select {
		case req := <-leader.requests:
			if req.SessionEpoch == 0 {
				clear(held)
			}
			maps.Copy(held, listed(req))
			for _, ft := range req.ForgottenTopics {
				for _, i := range ft.Partitions {
					delete(held, i)
				}
			}
			return req
		case <-time.After(30 * time.Second):
			t.Fatalf("no fetch %s", what)
			return nil
		}
	}
	for {
		req := next("after replicating")
		if req.SessionEpoch > 0 && len(listed(req)) == 0 && held[0] == 1 && held[1] == 1 {
			break
		}
	}

	armed.Store(true)
	b.maintain(context.Background(), time.Now().Add(8*24*time.Hour)) // past segment.ms: the active segment rolls
	if p0.log().Err() == nil {
		t.Fatal("the injected fault did not fail t-0's log")
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		req := next("after t-0's log failed")
		if forgets(req, 0) {
			if _, ok := held[1]; !ok {
				t.Fatal("t-1 forgotten too")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fetch forgets t-0 in 30 s after its log failed (the leader counts it fetched)")
		}
	}
}

// A follower fetches nothing while the disk is below its reserve (the
// leader then sees it fall behind), and every partition again once it is
// back: the partitions the session held, settled and not looked at by an
// idle round, are all looked at when the disk's state changes.
func TestFollowerFetchesNothingWhileDiskLow(t *testing.T) {
	const n = 3
	f, leader, byIndex := idleFollower(t, n)
	var free atomic.Int64
	free.Store(1 << 40)
	disk := storage.NewGuardStatfs("/partitions", 1<<30, func(string) (int64, int64, error) { return free.Load(), 1 << 41, nil })
	f.m.disk = disk
	for _, p := range byIndex {
		p.disk = disk
	}
	conn := connectFake(t, leader)
	for range 3 { // open the session, apply its answer, idle
		if err := f.round(conn); err != nil {
			t.Fatal(err)
		}
		<-leader.requests
	}
	f.collect()
	if req, ready := f.fetchRequest(); ready != n || len(listed(req)) != 0 {
		t.Fatalf("idle request holds %d partitions listing %v, want %d listing none", ready, listed(req), n)
	}

	free.Store(1 << 20)
	disk.Measure(true)
	f.collect()
	req, ready := f.fetchRequest()
	if ready != 0 || len(req.ForgottenTopics) != 1 || len(req.ForgottenTopics[0].Partitions) != n {
		t.Fatalf("with the disk low the session holds %d partitions, forgetting %+v; want none held, all %d forgotten", ready, req.ForgottenTopics, n)
	}
	f.collect()
	if _, ready := f.fetchRequest(); ready != 0 {
		t.Fatalf("the next round with the disk low holds %d partitions, want none", ready)
	}

	free.Store(1 << 40)
	disk.Measure(true)
	f.collect()
	if req, ready := f.fetchRequest(); ready != n || len(listed(req)) != n {
		t.Fatalf("with the disk back the session holds %d partitions listing %v, want all %d listed again", ready, listed(req), n)
	}
}

// A round in which more partitions moved than one request may list
// (replfetch.MaxRequestBytes) must not leave the others held by the leader's
// session where they were: the leader reads a held partition again at the
// position its session has, so it sent each of them the records this log
// already held, again every fetch (the append failed "base offset 1
// below 2"), and counted the follower there, holding the high watermark
// back until a later request listed it. After a kill -9 at 100,000
// partitions the new leaders appended to 50,000 at once; thousands of
// acks=all writes waited out their timeout again and again, and leaders
// dropped their followers from the ISR after 30 s (issue 19). Each one
// the request cannot list is forgotten, and a later request lists it.
func TestFollowerForgetsWhatItCannotListYet(t *testing.T) {
	maxFetchPartitions := replfetch.PerRequest("t")
	n := maxFetchPartitions + 2000
	f, leader, byIndex := idleFollower(t, n)
	conn := connectFake(t, leader)
	round := func() *kmsg.FetchRequest {
		t.Helper()
		if err := f.round(conn); err != nil {
			t.Fatal(err)
		}
		return <-leader.requests
	}
	for f.session.Len() < n || len(f.work) > 0 { // the session holds them all at 0
		round()
	}
	for _, p := range byIndex { // each got a record, as an answer brings it
		if err := p.appendAsFollower(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}}), 1); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; ; r++ {
		if r == 5 {
			t.Fatal("positions still unlisted after 5 rounds")
		}
		req := round()
		if len(listed(req)) > maxFetchPartitions {
			t.Fatalf("request lists %d partitions, at most %d", len(listed(req)), maxFetchPartitions)
		}
		stale := 0
		for _, p := range byIndex {
			if pos, held := f.session.Sent(p); held && pos.Offset != p.log().EndOffset() {
				stale++
			}
		}
		if stale > 0 {
			t.Fatalf("round %d: the session holds %d partitions at a position their log moved past", r, stale)
		}
		if f.session.Len() == n && len(f.work) == 0 {
			break
		}
	}
	for i, p := range byIndex {
		if pos, _ := f.session.Sent(p); pos.Offset != 1 {
			t.Fatalf("t-%d held at %d, want 1", i, pos.Offset)
		}
	}
}
