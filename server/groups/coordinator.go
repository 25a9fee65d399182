package groups

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

// OffsetsTopic is the internal topic holding the groups' offsets and
// metadata.
const OffsetsTopic = "__consumer_offsets"

const (
	offsetsTopic              = OffsetsTopic
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

// Coordinator serves the groups whose offsets partitions this broker
// leads.
type Coordinator struct {
	cfg     Config
	b       Backend
	logger  *slog.Logger
	now     func() time.Time
	initial time.Duration // delay before the first generation of an empty group

	loadMu sync.Mutex // serializes follow (leadership changes and loads)

	mu     sync.Mutex
	shards map[int32]*groupShard // offsets partitions led here; guarded by mu
	groups map[string]*group     // groups of loaded shards; guarded by mu
	closed bool                  // guarded by mu
	lags   map[string]lagSample  // each group's lag at the last sample; guarded by mu
	txn    txnOffsets            // offsets staged in transactions (txnoffsets.go)

	// life ends at Close: it bounds loads and the groups' appends, so
	// Close never waits out an acks=all timeout or a load.
	life context.Context
	stop context.CancelFunc
	done chan struct{} // closed when run returns; nil before Start

	flushMu     sync.Mutex     // guards flushClosed and flushers.Add; after group.mu
	flushClosed bool           // no more flushers (Close)
	flushers    sync.WaitGroup // the groups' flusher goroutines (writes.go)
}

// groupShard is one offsets partition this broker leads.
type groupShard struct {
	epoch  int32
	loaded bool
}

// New returns a coordinator of this broker's groups; Start starts it.
func New(cfg Config, b Backend) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	life, stop := context.WithCancel(context.Background())
	return &Coordinator{cfg: cfg, b: b, logger: cfg.Logger, now: cfg.Now,
		initial: groupInitialRebalanceWait, shards: map[int32]*groupShard{}, groups: map[string]*group{},
		life: life, stop: stop}
}

// Start starts the coordinator's goroutine.
func (c *Coordinator) Start() {
	c.done = make(chan struct{})
	go c.run(c.life)
}

// Close stops the goroutines (appends in flight fail) and fails every
// pending join and sync. It may be called more than once.
func (c *Coordinator) Close() {
	c.stop()
	if c.done != nil {
		<-c.done
	}
	c.flushMu.Lock()
	c.flushClosed = true
	c.flushMu.Unlock()
	c.flushers.Wait()
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

func (c *Coordinator) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(groupTick)
	defer tick.Stop()
	lastLag := time.Time{}
	for {
		_, changed := c.b.Image()
		c.follow(ctx)
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
	if t, ok := img.Topics.Lookup(offsetsTopic); ok {
		return int32(len(t.Partitions))
	}
	return 0
}

// follow loads the offsets partitions this broker newly leads and drops
// those it no longer leads (or leads in a newer epoch: reloaded). A load
// waits for the partition's high watermark, until ctx ends.
func (c *Coordinator) follow(ctx context.Context) {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	img, _ := c.b.Image()
	want := map[int32]int32{}
	if t, ok := img.Topics.Lookup(offsetsTopic); ok {
		for i, pm := range t.Partitions {
			if pm.Leader == c.cfg.NodeID {
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
		groups, err := c.loadPartition(ctx, p)
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
func (c *Coordinator) unloadLocked(p int32) {
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

// Partition is Kafka's abs(groupId.hashCode) % n (Utils.abs maps
// MinInt32 to 0).
func Partition(group string, n int32) int32 {
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
func (c *Coordinator) ensureOffsetsTopic(ctx context.Context) (*raftfsm.Image, error) {
	img, _ := c.b.Image()
	if offsetsPartitions(img) > 0 {
		return img, nil
	}
	n := c.cfg.OffsetsPartitions
	if n <= 0 {
		n = defaultOffsetsPartitions
	}
	rf := int16(min(3, aliveBrokers(img)))
	err := c.b.CreateTopic(ctx, offsetsTopic, n, max(rf, 1), map[string]string{"cleanup.policy": "compact"})
	if err != nil && !errors.Is(err, raftfsm.ErrTopicExists) {
		return nil, fmt.Errorf("%w: create %s: %v", kafkaproto.ErrCoordinatorNotAvailable, offsetsTopic, err)
	}
	// The load is bounded by the request and by Close.
	lctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(c.life, cancel)()
	defer cancel()
	c.follow(lctx)
	img, _ = c.b.Image()
	return img, nil
}

// coordinatorOf returns the broker id coordinating group (-1 when the
// offsets partition has no leader) and the partition.
func (c *Coordinator) coordinatorOf(ctx context.Context, group string, create bool) (int32, int32, error) {
	if group == "" {
		return -1, -1, fmt.Errorf("%w: empty group id", kafkaproto.ErrInvalidGroupID)
	}
	img, _ := c.b.Image()
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
	t, ok := img.Topics.Lookup(offsetsTopic)
	if !ok || len(t.Partitions) == 0 {
		return -1, -1, fmt.Errorf("%w: %s is not in this broker's metadata yet", kafkaproto.ErrCoordinatorNotAvailable, offsetsTopic)
	}
	p := Partition(group, int32(len(t.Partitions)))
	return t.Partitions[p].Leader, p, nil
}

// lookup returns the group called name when this broker coordinates it;
// create makes an empty one when it does not exist.
func (c *Coordinator) lookup(ctx context.Context, name string, create bool) (*group, error) {
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
	case !ok && leader == c.cfg.NodeID:
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
func (c *Coordinator) remove(g *group) {
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
}

// snapshot returns the loaded groups sorted by name.
func (c *Coordinator) snapshot() []*group {
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
func (c *Coordinator) expire(now time.Time) {
	for _, g := range c.snapshot() {
		g.mu.Lock()
		g.tickLocked(now)
		g.mu.Unlock()
	}
}

// newMemberID is Kafka's clientId-uuid form.
func (c *Coordinator) newMemberID(clientID string) string {
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + nuid.Next()
}

func aliveBrokers(img *raftfsm.Image) int {
	n := 0
	for _, b := range img.Brokers {
		if b.State == raftfsm.BrokerAlive {
			n++
		}
	}
	return n
}
