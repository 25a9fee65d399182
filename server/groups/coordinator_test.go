package groups

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
)

// In-process tests of the coordinator against fakeBackend: the group state
// machine, loads and failover, commits and their errors, and that no group
// lock is held while its records are appended.

const testNode = 1

func newTestCoordinator(t *testing.T, b *fakeBackend) (*Coordinator, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Config{NodeID: testNode, Now: clk.Now}, b)
	t.Cleanup(c.Close)
	return c, clk
}

// loaded makes the coordinator follow the image once and checks it then
// coordinates partition p.
func loaded(t *testing.T, c *Coordinator, p int32) {
	t.Helper()
	c.follow(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if sh := c.shards[p]; sh == nil || !sh.loaded {
		t.Fatalf("offsets partition %d not loaded", p)
	}
}

func groupOf(t *testing.T, c *Coordinator, name string) *group {
	t.Helper()
	g, err := c.lookup(context.Background(), name, false)
	if err != nil || g == nil {
		t.Fatalf("lookup %s: %v %v", name, g, err)
	}
	return g
}

// waitState waits (on the group's change channel, bounded) for a state.
func waitState(t *testing.T, g *group, want groupState) {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		st, ch := g.state, g.changed
		g.mu.Unlock()
		if st == want {
			return
		}
		select {
		case <-ch:
		case <-guard:
			t.Fatalf("group state %s, want %s", st, want)
		}
	}
}

func consumerJoin(group, member string) kafkaproto.JoinRequest {
	return kafkaproto.JoinRequest{MemberRef: kafkaproto.MemberRef{Group: group, MemberID: member},
		ClientID: "test", SessionTimeout: 10_000, RebalanceTimeout: 10_000, ProtocolType: "consumer",
		Protocols: []kafkaproto.GroupProtocol{{Name: "range", Metadata: encodeSubscription([]string{"orders"}, nil)}}}
}

type joined struct {
	res kafkaproto.JoinResult
	err error
}

func joinAsync(c *Coordinator, req kafkaproto.JoinRequest) chan joined {
	ch := make(chan joined, 1)
	go func() {
		res, err := c.JoinGroup(context.Background(), req)
		ch <- joined{res, err}
	}()
	return ch
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10 s")
	}
	var zero T
	return zero
}

// lastGroupRecord decodes the newest metadata record of group in the log.
func lastGroupRecord(t *testing.T, l *fakeLog, group string) *storedGroup {
	t.Helper()
	var out *storedGroup
	for _, r := range l.records() {
		kind, name, _, err := parseGroupKey(r.Key)
		if err != nil || kind != recordKindGroup || name != group {
			continue
		}
		out = nil
		if r.Value != nil {
			out = &storedGroup{}
			if err := json.Unmarshal(r.Value, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// stableGroup joins one Kafka member and syncs it to Stable.
func stableGroup(t *testing.T, c *Coordinator, clk *fakeClock, name string) kafkaproto.JoinResult {
	t.Helper()
	ch := joinAsync(c, consumerJoin(name, ""))
	g := waitGroup(t, c, name)
	waitState(t, g, statePreparingRebalance)
	c.expire(clk.add(groupInitialRebalanceWait)) // the initial delay passes
	j := recv(t, ch)
	if j.err != nil || j.res.LeaderID != j.res.MemberID || j.res.Generation != 1 {
		t.Fatalf("join: %+v %v", j.res, j.err)
	}
	sync, err := c.SyncGroup(context.Background(), kafkaproto.SyncRequest{
		MemberRef:   kafkaproto.MemberRef{Group: name, MemberID: j.res.MemberID, Generation: 1},
		Assignments: map[string][]byte{j.res.MemberID: []byte("a1")}})
	if err != nil || string(sync.Assignment) != "a1" {
		t.Fatalf("sync: %+v %v", sync, err)
	}
	waitState(t, g, stateStable)
	return j.res
}

// waitFlushed waits until no flusher of g runs (its queue is written and
// every outcome recorded).
func waitFlushed(t *testing.T, g *group) {
	t.Helper()
	for range 10000 {
		g.mu.Lock()
		busy := g.flushing
		g.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond) // polling another goroutine's progress, bounded
	}
	t.Fatal("the group's flusher never finished")
}

// waitGroup waits for a group to exist (a join creates it).
func waitGroup(t *testing.T, c *Coordinator, name string) *group {
	t.Helper()
	for range 10000 {
		c.mu.Lock()
		g := c.groups[name]
		c.mu.Unlock()
		if g != nil {
			return g
		}
		time.Sleep(time.Millisecond) // polling for another goroutine's creation, bounded
	}
	t.Fatalf("group %s never created", name)
	return nil
}

func TestGroupStateMachine(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	m1 := stableGroup(t, c, clk, "g")
	g := groupOf(t, c, "g")
	ref1 := kafkaproto.MemberRef{Group: "g", MemberID: m1.MemberID, Generation: 1}
	if err := c.Heartbeat(context.Background(), ref1); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if sg := lastGroupRecord(t, b.logs[0], "g"); sg == nil || sg.Generation != 1 || len(sg.Members) != 1 || string(sg.Members[0].Assignment) != "a1" {
		t.Fatalf("stored group after sync: %+v", sg)
	}

	// A second member: a rebalance; the first learns it from its heartbeat.
	ch2 := joinAsync(c, consumerJoin("g", ""))
	waitState(t, g, statePreparingRebalance)
	if err := c.Heartbeat(context.Background(), ref1); !errors.Is(err, kafkaproto.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	ch1 := joinAsync(c, consumerJoin("g", m1.MemberID))
	j1, j2 := recv(t, ch1), recv(t, ch2)
	if j1.err != nil || j2.err != nil || j1.res.Generation != 2 || j2.res.Generation != 2 {
		t.Fatalf("rejoin: %+v %v / %+v %v", j1.res, j1.err, j2.res, j2.err)
	}
	if j1.res.LeaderID != m1.MemberID || len(j1.res.Members) != 2 {
		t.Fatalf("leader keeps the lead and sees both members: %+v", j1.res)
	}
	waitState(t, g, stateCompletingRebalance)
	// A commit while the assignment is pending is refused, as Kafka does.
	if _, err := c.CommitOffsets(context.Background(), kafkaproto.MemberRef{Group: "g", MemberID: m1.MemberID, Generation: 2},
		[]kafkaproto.CommitOffset{{TopicPartition: tp{Topic: "orders"}, Offset: 1}}); !errors.Is(err, kafkaproto.ErrRebalanceInProgress) {
		t.Fatalf("commit while completing: %v", err)
	}
	// A stale generation is fenced.
	if err := c.Heartbeat(context.Background(), ref1); !errors.Is(err, kafkaproto.ErrIllegalGeneration) {
		t.Fatalf("heartbeat with generation 1: %v", err)
	}

	// Both leave: the group is Empty in a new generation, in memory and in the log.
	errs, err := c.LeaveGroup(context.Background(), "g", []kafkaproto.MemberRef{{Group: "g", MemberID: j1.res.MemberID}, {Group: "g", MemberID: j2.res.MemberID}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("leave: %v %v", errs, err)
	}
	waitState(t, g, stateEmpty)
	b.waitAppends(t, 2)
	if sg := lastGroupRecord(t, b.logs[0], "g"); sg == nil || sg.Generation != 3 || len(sg.Members) != 0 {
		t.Fatalf("stored group after leaving: %+v", sg)
	}
	// An expired session removes a member and rebalances without it.
	m3 := stableGroup2(t, c, clk, "g")
	c.expire(clk.add(11 * time.Second))
	waitState(t, g, stateEmpty)
	if err := c.Heartbeat(context.Background(), kafkaproto.MemberRef{Group: "g", MemberID: m3.MemberID, Generation: m3.Generation}); !errors.Is(err, kafkaproto.ErrUnknownMemberID) {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
}

// stableGroup2 is stableGroup for a group that already has generations.
func stableGroup2(t *testing.T, c *Coordinator, clk *fakeClock, name string) kafkaproto.JoinResult {
	t.Helper()
	ch := joinAsync(c, consumerJoin(name, ""))
	g := groupOf(t, c, name)
	waitState(t, g, statePreparingRebalance)
	c.expire(clk.add(groupInitialRebalanceWait))
	j := recv(t, ch)
	if j.err != nil {
		t.Fatalf("join: %v", j.err)
	}
	if _, err := c.SyncGroup(context.Background(), kafkaproto.SyncRequest{
		MemberRef:   kafkaproto.MemberRef{Group: name, MemberID: j.res.MemberID, Generation: j.res.Generation},
		Assignments: map[string][]byte{j.res.MemberID: []byte("a")}}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	waitState(t, g, stateStable)
	return j.res
}

func TestGroupCommitAndFetchErrors(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	ctx := context.Background()
	admin := kafkaproto.MemberRef{Group: "g", Generation: -1}
	at := func(off int64) []kafkaproto.CommitOffset {
		return []kafkaproto.CommitOffset{{TopicPartition: tp{Topic: "orders", Partition: 1}, Offset: off, LeaderEpoch: -1}}
	}
	fetched := func() int64 {
		t.Helper()
		out, err := c.FetchOffsets(ctx, "g", []tp{{Topic: "orders", Partition: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Offset
	}
	if fetched() != -1 {
		t.Fatal("an offset before any commit")
	}
	// A failed append commits nothing: memory stays with the log.
	b.mu.Lock()
	b.appendErr = errors.New("disk full")
	b.mu.Unlock()
	if _, err := c.CommitOffsets(ctx, admin, at(5)); err == nil {
		t.Fatal("commit succeeded while the append failed")
	}
	if got := fetched(); got != -1 {
		t.Fatalf("offset %d after a failed commit, want -1", got)
	}
	b.mu.Lock()
	b.appendErr = nil
	b.mu.Unlock()
	if errs, err := c.CommitOffsets(ctx, admin, at(7)); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", errs, err)
	}
	if got := fetched(); got != 7 {
		t.Fatalf("fetched %d, want 7", got)
	}
	// Too much metadata fails that offset alone.
	big := string(make([]byte, groupMaxMetadataBytes+1))
	offs := append(at(8), kafkaproto.CommitOffset{TopicPartition: tp{Topic: "orders", Partition: 0}, Offset: 1, Metadata: &big})
	errs, err := c.CommitOffsets(ctx, admin, offs)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], kafkaproto.ErrOffsetMetadataTooLarge) {
		t.Fatalf("commit with large metadata: %v %v", errs, err)
	}
	// Members are checked: unknown member, then a stale generation.
	m := stableGroup(t, c, clk, "g")
	if _, err := c.CommitOffsets(ctx, kafkaproto.MemberRef{Group: "g", MemberID: "nobody", Generation: 1}, at(9)); !errors.Is(err, kafkaproto.ErrUnknownMemberID) {
		t.Fatalf("unknown member: %v", err)
	}
	if _, err := c.CommitOffsets(ctx, kafkaproto.MemberRef{Group: "g", MemberID: m.MemberID, Generation: 0}, at(9)); !errors.Is(err, kafkaproto.ErrIllegalGeneration) {
		t.Fatalf("stale generation: %v", err)
	}
	// Offsets of a consumed topic are not deleted; a non-empty group is not.
	derrs, err := c.DeleteOffsets(ctx, "g", []tp{{Topic: "orders", Partition: 1}})
	if err != nil || !errors.Is(derrs[0], kafkaproto.ErrGroupSubscribedToTopic) {
		t.Fatalf("delete offsets of a subscribed topic: %v %v", derrs, err)
	}
	if err := c.DeleteGroup(ctx, "g"); !errors.Is(err, kafkaproto.ErrNonEmptyGroup) {
		t.Fatalf("delete a group with members: %v", err)
	}
	if got := fetched(); got != 8 {
		t.Fatalf("fetched %d, want 8", got)
	}
}

// An append in flight (acks=all waits for the replicas, up to 10 s) holds
// no group lock: heartbeats, fetches, describes and the timers of the same
// group go on meanwhile.
func TestGroupAppendHoldsNoLock(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	m := stableGroup(t, c, clk, "g")
	b.waitAppends(t, 1)
	<-b.appending
	gate := make(chan struct{})
	b.mu.Lock()
	b.appendGate = gate
	b.mu.Unlock()
	ref := kafkaproto.MemberRef{Group: "g", MemberID: m.MemberID, Generation: m.Generation}
	done := make(chan error, 1)
	go func() {
		_, err := c.CommitOffsets(context.Background(), ref, []kafkaproto.CommitOffset{{TopicPartition: tp{Topic: "orders"}, Offset: 3, LeaderEpoch: -1}})
		done <- err
	}()
	recv(t, b.appending) // the commit's append is in flight

	others := make(chan error, 1)
	go func() {
		if err := c.Heartbeat(context.Background(), ref); err != nil {
			others <- err
			return
		}
		if _, err := c.FetchOffsets(context.Background(), "g", nil); err != nil {
			others <- err
			return
		}
		if _, err := c.DescribeGroup(context.Background(), "g"); err != nil {
			others <- err
			return
		}
		c.expire(clk.add(time.Second))
		others <- nil
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("heartbeat, fetch, describe or the timers waited for the append")
	}
	close(gate)
	if err := recv(t, done); err != nil {
		t.Fatalf("commit: %v", err)
	}
	out, _ := c.FetchOffsets(context.Background(), "g", []tp{{Topic: "orders"}})
	if out[0].Offset != 3 {
		t.Fatalf("fetched %d after the commit, want 3", out[0].Offset)
	}
}

// A group metadata write that fails is written again (the current state)
// until it succeeds, so the log does not stay behind memory.
func TestGroupPersistRetried(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	m := stableGroup(t, c, clk, "g")
	b.waitAppends(t, 1)
	b.mu.Lock()
	b.appendErr = errors.New("not enough replicas")
	b.mu.Unlock()
	errs, err := c.LeaveGroup(context.Background(), "g", []kafkaproto.MemberRef{{Group: "g", MemberID: m.MemberID}})
	if err != nil || errs[0] != nil {
		t.Fatalf("leave: %v %v", errs, err)
	}
	g := groupOf(t, c, "g")
	waitState(t, g, stateEmpty)
	b.waitAppends(t, 2) // the failed write of the Empty generation
	waitFlushed(t, g)   // and its flusher has recorded the failure
	if sg := lastGroupRecord(t, b.logs[0], "g"); sg == nil || sg.Generation != 1 {
		t.Fatalf("log moved on without a write: %+v", sg)
	}
	b.mu.Lock()
	b.appendErr = nil
	b.mu.Unlock()
	c.expire(clk.add(groupTick))
	b.waitAppends(t, 3)
	sg := lastGroupRecord(t, b.logs[0], "g")
	if sg == nil || sg.Generation != 2 || len(sg.Members) != 0 {
		t.Fatalf("after the retry the log holds %+v, want generation 2 without members", sg)
	}
}

// A new coordinator rebuilds groups from the offsets partition; one that
// loses the partition drops its groups and fails their waiters with
// NOT_COORDINATOR; leading it again reloads what was written.
func TestCoordinatorLoadAndFailover(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	ctx := context.Background()
	m := stableGroup(t, c, clk, "g")
	ref := kafkaproto.MemberRef{Group: "g", MemberID: m.MemberID, Generation: m.Generation}
	if _, err := c.CommitOffsets(ctx, ref, []kafkaproto.CommitOffset{{TopicPartition: tp{Topic: "orders", Partition: 1}, Offset: 42, LeaderEpoch: 4}}); err != nil {
		t.Fatal(err)
	}

	// Another broker's coordinator (same log) loads it.
	c2, _ := newTestCoordinator(t, b)
	loaded(t, c2, 0)
	d, err := c2.DescribeGroup(ctx, "g")
	if err != nil || d.State != string(stateStable) || len(d.Members) != 1 || d.Members[0].MemberID != m.MemberID || string(d.Members[0].Assignment) != "a1" {
		t.Fatalf("loaded group: %+v %v", d, err)
	}
	if err := c2.Heartbeat(ctx, ref); err != nil {
		t.Fatalf("the member carries on with its generation: %v", err)
	}
	out, _ := c2.FetchOffsets(ctx, "g", []tp{{Topic: "orders", Partition: 1}})
	if out[0].Offset != 42 || out[0].LeaderEpoch != 4 {
		t.Fatalf("loaded offset %+v", out[0])
	}

	// The first loses the partition while a join waits.
	waiter := joinAsync(c, consumerJoin("g", ""))
	waitState(t, groupOf(t, c, "g"), statePreparingRebalance)
	b.setLeader(0, 2, 2)
	c.follow(context.Background())
	if j := recv(t, waiter); !errors.Is(j.err, kafkaproto.ErrNotCoordinator) {
		t.Fatalf("pending join after losing the partition: %v", j.err)
	}
	if err := c.Heartbeat(ctx, ref); !errors.Is(err, kafkaproto.ErrNotCoordinator) {
		t.Fatalf("heartbeat to the old coordinator: %v", err)
	}

	// Leading it again (a newer epoch) reloads it.
	b.setLeader(0, testNode, 3)
	loaded(t, c, 0)
	if out, _ := c.FetchOffsets(ctx, "g", []tp{{Topic: "orders", Partition: 1}}); out[0].Offset != 42 {
		t.Fatalf("reloaded offset %+v", out[0])
	}
}

// A load waits for the high watermark to reach the log end (commits
// acknowledged by a former leader), woken by the partition, and Close
// ends a load that waits.
func TestCoordinatorLoadWaitsForHighWatermark(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	b.logs[0].append([]Record{{Key: offsetKey("g", tp{Topic: "orders"}), Value: []byte(`{"v":1,"offset":9,"leader_epoch":-1}`)}})
	b.logs[0].hold(0)
	c, _ := newTestCoordinator(t, b)
	loadDone := make(chan struct{})
	go func() {
		c.follow(context.Background())
		close(loadDone)
	}()
	recv(t, b.logs[0].hwmCalls)
	if _, err := c.lookup(context.Background(), "g", false); !errors.Is(err, kafkaproto.ErrCoordinatorLoading) {
		t.Fatalf("lookup while loading: %v", err)
	}
	b.logs[0].release()
	recv(t, loadDone)
	if out, _ := c.FetchOffsets(context.Background(), "g", []tp{{Topic: "orders"}}); out[0].Offset != 9 {
		t.Fatalf("loaded offset %+v", out[0])
	}

	// Close while the run loop's load waits (the clock stands still, so
	// only cancellation can end it).
	b2 := newFakeBackend(testNode, 1)
	b2.logs[0].append([]Record{{Key: groupKey("g")}})
	b2.logs[0].hold(0)
	c2, _ := newTestCoordinator(t, b2)
	c2.Start()
	recv(t, b2.logs[0].hwmCalls)
	closed := make(chan struct{})
	go func() {
		c2.Close()
		close(closed)
	}()
	recv(t, closed)
}

// An HTTP member joins (the coordinator runs the protocol and the range
// assignor for it), polls its partitions from the committed offsets or the
// reset policy, commits its positions, and leaves.
func TestHTTPMemberJoinPollCommit(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	b.produce("orders", 0, 3)
	b.produce("orders", 1, 2)
	c, clk := newTestCoordinator(t, b)
	loaded(t, c, 0)
	ctx := context.Background()
	h := c.HTTP()
	type joinedHTTP struct {
		ms  api.GroupMembership
		err error
	}
	ch := make(chan joinedHTTP, 1)
	go func() {
		ms, err := h.JoinGroup(ctx, "h", api.GroupJoinRequest{Topics: []string{"orders"}, ClientID: "web"})
		ch <- joinedHTTP{ms, err}
	}()
	g := waitGroup(t, c, "h")
	waitState(t, g, statePreparingRebalance)
	c.expire(clk.add(groupInitialRebalanceWait))
	j := recv(t, ch)
	if j.err != nil || j.ms.Rebalancing || len(j.ms.Assignment) != 1 || len(j.ms.Assignment[0].Partitions) != 2 {
		t.Fatalf("join: %+v %v", j.ms, j.err)
	}
	member := j.ms.MemberID
	// Nothing committed: the reset policy (earliest) gives every record.
	got := 0
	for range 2 {
		res, err := h.PollGroup(ctx, "h", member, api.GroupPollRequest{MaxRecords: 10, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += len(res.Records)
	}
	if got != 5 {
		t.Fatalf("polled %d records, want 5", got)
	}
	if _, err := h.CommitMember(ctx, "h", member, nil); err != nil {
		t.Fatalf("commit positions: %v", err)
	}
	offs, err := h.GroupOffsets(ctx, "h")
	if err != nil || len(offs) != 2 || offs[0].Offset != 3 || offs[1].Offset != 2 {
		t.Fatalf("committed %+v %v, want 3 and 2", offs, err)
	}
	// A poll of a member that is not one is NOT_FOUND; leaving empties the group.
	if _, err := h.PollGroup(ctx, "h", "nobody", api.GroupPollRequest{MaxRecords: 1, MaxBytes: 1}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("poll by a stranger: %v", err)
	}
	if err := h.LeaveGroup(ctx, "h", member); err != nil {
		t.Fatalf("leave: %v", err)
	}
	waitState(t, g, stateEmpty)
	if err := h.DeleteGroup(ctx, "h"); err != nil {
		t.Fatalf("delete the empty group: %v", err)
	}
	if _, err := h.DescribeGroup(ctx, "h"); !errors.Is(err, api.ErrUnknownGroup) {
		t.Fatalf("describe a deleted group: %v", err)
	}
}
