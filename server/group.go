package server

// Consumer groups: one coordinator for Kafka clients and HTTP consumers.
//
// Files: group.go (coordinator lifecycle, leadership of the offsets topic,
// group lookup), groupstate.go (group state, JoinGroup and the rebalance),
// groupsync.go (SyncGroup, heartbeats, leaving, session and rebalance timers),
// groupstore.go (records in __consumer_offsets: encoding, appends, load),
// groupoffsets.go (commit, fetch, delete, list, describe), groupkafka.go
// (kafkaproto.GroupCoordinator), grouphttp.go and grouphttpmember.go (the
// HTTP API: admin, lag, HTTP members, forwarding to the coordinator),
// groupassign.go (the server-side range assignor for HTTP leaders),
// grouplag.go (the lag sampler, runnel_group_lag and the UI lag series).
//
// The coordinator of group g is the leader of partition
// abs(javaHash(g)) % n of __consumer_offsets. Each node's coordinator
// follows the metadata image: when it becomes the leader of an offsets
// partition it loads the groups of that partition by scanning it from the
// start, and answers COORDINATOR_LOAD_IN_PROGRESS for them meanwhile; when
// it stops leading one it drops those groups (NOT_COORDINATOR), failing
// any pending joins and syncs. Offsets and group metadata are appended to
// the partition like any data (the partition's acks=all path), never
// proposed to Raft.
//
// Goroutines: run (leadership follower, session and rebalance timers, lag
// sampler) is started by start and stopped by close. JoinGroup and
// SyncGroup callers wait on a channel of their member, without locks.
//
// Lock order: groupCoordinator.loadMu, then groupCoordinator.mu, then
// group.mu, then the broker's locks (appends happen under group.mu so the
// log order of a group's records is the order of its in-memory changes).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/nats-io/nuid"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
)

const (
	offsetsTopic              = "__consumer_offsets"
	defaultOffsetsPartitions  = 3
	groupTick                 = 100 * time.Millisecond
	groupLagSampleEvery       = 10 * time.Second
	groupInitialRebalanceWait = 500 * time.Millisecond // Kafka's group.initial.rebalance.delay.ms, shortened
	groupMinSessionTimeout    = 6 * time.Second        // Config.GroupMinSessionTimeout's default
	groupMaxSessionTimeout    = 30 * time.Minute
	groupMaxMetadataBytes     = 4096 // Kafka's offset.metadata.max.bytes
)

var (
	errGroupNotCoordinator = fmt.Errorf("%w: this broker does not coordinate the group", kafkaproto.ErrNotCoordinator)
	errGroupLoading        = fmt.Errorf("%w: loading the group's offsets partition", kafkaproto.ErrCoordinatorLoading)
	errGroupClosed         = fmt.Errorf("%w: coordinator shutting down", kafkaproto.ErrCoordinatorNotAvailable)
)

// groupCoordinator serves the groups whose offsets partitions this broker
// leads.
type groupCoordinator struct {
	s       *Server
	logger  *slog.Logger
	now     func() time.Time
	initial time.Duration // delay before the first generation of an empty group

	loadMu sync.Mutex // serializes follow (leadership changes and loads)

	mu     sync.Mutex
	shards map[int32]*groupShard // offsets partitions led here; guarded by mu
	groups map[string]*group     // groups of loaded shards; guarded by mu
	closed bool                  // guarded by mu
	lags   map[string]lagSample  // each group's lag at the last sample; guarded by mu

	cancel context.CancelFunc
	done   chan struct{}
}

// groupShard is one offsets partition this broker leads.
type groupShard struct {
	epoch  int32
	loaded bool
}

func newGroupCoordinator(s *Server) *groupCoordinator {
	return &groupCoordinator{s: s, logger: s.logger.With("component", "groups"), now: time.Now,
		initial: groupInitialRebalanceWait, shards: map[int32]*groupShard{}, groups: map[string]*group{}}
}

func (c *groupCoordinator) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx)
}

// close stops the goroutine and fails every pending join and sync.
func (c *groupCoordinator) close() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for name, g := range c.groups {
		g.mu.Lock()
		g.unloadLocked(errGroupClosed)
		g.mu.Unlock()
		delete(c.groups, name)
	}
}

func (c *groupCoordinator) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(groupTick)
	defer tick.Stop()
	lastLag := time.Time{}
	for {
		_, changed := c.s.meta.Image()
		c.follow()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case now := <-tick.C:
			c.expire(now)
			if now.Sub(lastLag) >= groupLagSampleEvery {
				lastLag = now
				c.sampleLag(ctx)
			}
		}
	}
}

// offsetsPartitions returns the partition count of the offsets topic (0
// when it does not exist yet).
func offsetsPartitions(img *raftfsm.Image) int32 {
	if t, ok := img.Topics[offsetsTopic]; ok {
		return int32(len(t.Partitions))
	}
	return 0
}

// follow loads the offsets partitions this broker newly leads and drops
// those it no longer leads (or leads in a newer epoch: reloaded).
func (c *groupCoordinator) follow() {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	img, _ := c.s.meta.Image()
	want := map[int32]int32{}
	if t, ok := img.Topics[offsetsTopic]; ok {
		for i, pm := range t.Partitions {
			if pm.Leader == c.s.cfg.NodeID {
				want[int32(i)] = pm.LeaderEpoch
			}
		}
	}
	var load []int32
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	for p, sh := range c.shards {
		if e, ok := want[p]; !ok || e != sh.epoch {
			c.unloadLocked(p)
		}
	}
	for p, e := range want {
		if _, ok := c.shards[p]; !ok {
			c.shards[p] = &groupShard{epoch: e}
			load = append(load, p)
		}
	}
	c.mu.Unlock()
	for _, p := range load {
		start := c.now()
		groups, err := c.loadPartition(p)
		c.mu.Lock()
		sh := c.shards[p]
		switch {
		case sh == nil || c.closed:
		case err != nil:
			// Retried at the next tick (the broker may not have caught up
			// with the image yet).
			delete(c.shards, p)
			level := slog.LevelWarn
			if errors.Is(err, errLoadBehind) {
				level = slog.LevelDebug // expected for a moment after a leader change
			}
			c.logger.Log(context.Background(), level, "load offsets partition", "partition", p, "err", err)
		default:
			for name, g := range groups {
				c.groups[name] = g
			}
			sh.loaded = true
			c.logger.Info("coordinating groups of offsets partition", "partition", p, "epoch", sh.epoch,
				"groups", len(groups), "load", time.Since(start).Round(time.Millisecond))
		}
		c.mu.Unlock()
	}
}

// unloadLocked drops the groups of an offsets partition.
func (c *groupCoordinator) unloadLocked(p int32) {
	delete(c.shards, p)
	for name, g := range c.groups {
		if g.partition != p {
			continue
		}
		g.mu.Lock()
		g.unloadLocked(errGroupNotCoordinator)
		g.mu.Unlock()
		delete(c.groups, name)
	}
	c.logger.Info("no longer coordinating groups of offsets partition", "partition", p)
}

// javaStringHash is Java's String.hashCode over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// groupPartition is Kafka's abs(groupId.hashCode) % n (Utils.abs maps
// MinInt32 to 0).
func groupPartition(group string, n int32) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// ensureOffsetsTopic creates __consumer_offsets on first use (compacted,
// replication factor min(3, alive brokers)) and loads what this broker
// leads of it.
func (c *groupCoordinator) ensureOffsetsTopic(ctx context.Context) (*raftfsm.Image, error) {
	img, _ := c.s.meta.Image()
	if offsetsPartitions(img) > 0 {
		return img, nil
	}
	n := c.s.cfg.OffsetsTopicPartitions
	if n <= 0 {
		n = defaultOffsetsPartitions
	}
	rf := int16(min(3, aliveBrokers(img)))
	_, err := c.s.createTopic(ctx, topicSpec{name: offsetsTopic, partitions: n, replicationFactor: max(rf, 1),
		configs: map[string]string{"cleanup.policy": "compact"}}, false)
	if err != nil && !errors.Is(err, raftfsm.ErrTopicExists) {
		return nil, fmt.Errorf("%w: create %s: %v", kafkaproto.ErrCoordinatorNotAvailable, offsetsTopic, err)
	}
	c.follow()
	img, _ = c.s.meta.Image()
	return img, nil
}

// coordinatorOf returns the broker id coordinating group (-1 when the
// offsets partition has no leader) and the partition.
func (c *groupCoordinator) coordinatorOf(ctx context.Context, group string, create bool) (int32, int32, error) {
	if group == "" {
		return -1, -1, fmt.Errorf("%w: empty group id", kafkaproto.ErrInvalidGroupID)
	}
	img, _ := c.s.meta.Image()
	if offsetsPartitions(img) == 0 {
		if !create {
			return -1, -1, nil
		}
		var err error
		if img, err = c.ensureOffsetsTopic(ctx); err != nil {
			return -1, -1, err
		}
	}
	// Created (possibly by another node, ErrTopicExists) but not yet in
	// this node's image: the coordinator is not known yet. Clients retry.
	t, ok := img.Topics[offsetsTopic]
	if !ok || len(t.Partitions) == 0 {
		return -1, -1, fmt.Errorf("%w: %s is not in this broker's metadata yet", kafkaproto.ErrCoordinatorNotAvailable, offsetsTopic)
	}
	p := groupPartition(group, int32(len(t.Partitions)))
	return t.Partitions[p].Leader, p, nil
}

// lookup returns the group called name when this broker coordinates it;
// create makes an empty one when it does not exist.
func (c *groupCoordinator) lookup(ctx context.Context, name string, create bool) (*group, error) {
	leader, p, err := c.coordinatorOf(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if leader < 0 && p < 0 {
		return nil, nil // no offsets topic: no group exists anywhere
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errGroupClosed
	}
	sh, ok := c.shards[p]
	switch {
	case !ok && leader == c.s.cfg.NodeID:
		return nil, errGroupLoading
	case !ok:
		return nil, fmt.Errorf("%w (broker %d does)", errGroupNotCoordinator, leader)
	case !sh.loaded:
		return nil, errGroupLoading
	}
	g, ok := c.groups[name]
	if !ok && create {
		g = newGroup(c, name, p)
		c.groups[name] = g
	}
	return g, nil
}

// remove forgets a group that was deleted (its tombstones are written).
func (c *groupCoordinator) remove(g *group) {
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
}

// snapshot returns the loaded groups sorted by name.
func (c *groupCoordinator) snapshot() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// expire runs the timers of every group: session timeouts, rebalance
// timeouts and the initial rebalance delay.
func (c *groupCoordinator) expire(now time.Time) {
	for _, g := range c.snapshot() {
		g.mu.Lock()
		g.tickLocked(now)
		g.mu.Unlock()
	}
}

// newMemberID is Kafka's clientId-uuid form.
func (c *groupCoordinator) newMemberID(clientID string) string {
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + nuid.Next()
}
