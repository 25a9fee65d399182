package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A leader's ISR changes, proposed to the controller by isrLoop (broker.go)
// from what its followers' fetches say (wantedISR, replication.go).

// maxISRChangesPerCommand keeps one ChangePartitions command of ISR changes
// well under the metadata log's command size (a change encodes to about
// 100 bytes), as the controller's leader moves do.
const maxISRChangesPerCommand = 4096

// Bounds of one ChangePartitionsBatch of ISR changes (command version 2,
// a change about 10 bytes in its binary envelope): its changes, and the
// partitions of the topics it rewrites, which the controller stores in one
// transaction with the command (a partition of three replicas about 35
// bytes stored, so 16,384 of them stay near half a MiB, under the bound
// the controller's own leader moves keep).
const (
	maxISRBatchChanges    = 32 << 10
	maxISRBatchPartitions = 16 << 10
)

// updateISR proposes the ISR change p's followers call for, if any.
func (b *Broker) updateISR(ctx context.Context, p *Partition, now time.Time) {
	b.updateISRs(ctx, []*Partition{p}, now)
}

// updateISRs proposes the ISR changes the partitions' followers call for
// and applies the image that follows once. A broker back from a restart
// rejoins the ISR of every partition it follows at once: with one Raft
// round trip per partition (and a reconcile after each) it stayed out of
// thousands of ISRs for minutes, each one short of a replica meanwhile
// (issue 19). Once the cluster's command version allows it, the changes of
// many topics go in one ChangePartitionsBatch command, as the controller's
// leader moves do: one command per topic was still one Raft round trip
// (20-100 ms) per topic, one after the other, hundreds of them while a
// restarted follower of 100 topics came back (issue 19).
func (b *Broker) updateISRs(ctx context.Context, parts []*Partition, now time.Time) {
	img, _ := b.meta.Image()
	var byTopic map[string][]raftfsm.ChangePartition
	for _, p := range parts {
		byTopic = b.addISRChange(byTopic, img, p, now)
	}
	b.proposeISRChanges(ctx, img, byTopic)
}

// isrRound is one check of the ISRs of the partitions led here: it asks
// those queued to be asked (isrAsk: new metadata, a follower outside the
// ISR at the high watermark, a change not made yet, a log just opened)
// and those whose due time came (isrDue, the time isrChangeWanted
// answered last) whether their ISR should change, and nothing else: a
// walk of every open log asking each whether it was due was a cache miss
// per log each second, 7% of a survivor's CPU after a kill -9 at 300,000
// partitions (issue 19). checked is how many it asked.
func (b *Broker) isrRound(ctx context.Context, now time.Time) (checked int) {
	img, _ := b.meta.Image()
	var byTopic map[string][]raftfsm.ChangePartition
	// An event from now on (a change wanted, below) is asked next round.
	for _, p := range b.isrAsk.take(func(p *Partition) { p.isrAsked.Store(false) }) {
		if b.open.has(p) { // an unopened log has no follower fetching it
			checked++
			byTopic = b.askISR(byTopic, img, p, now)
		}
	}
	var buf [maintainBatch]*Partition
	for {
		due := b.isrDue.popDue(now.UnixNano(), buf[:])
		if len(due) == 0 {
			break
		}
		for _, p := range due {
			checked++
			byTopic = b.askISR(byTopic, img, p, now)
		}
		clear(buf[:])
	}
	b.proposeISRChanges(ctx, img, byTopic)
	return checked
}

// askISR is addISRChange for the ISR round, which a test may watch.
func (b *Broker) askISR(byTopic map[string][]raftfsm.ChangePartition, img *raftfsm.Image, p *Partition, now time.Time) map[string][]raftfsm.ChangePartition {
	if b.onISRAsked != nil {
		b.onISRAsked(p)
	}
	return b.addISRChange(byTopic, img, p, now)
}

// addISRChange adds the ISR change p's followers call for, if any, to
// byTopic (made on the first change).
func (b *Broker) addISRChange(byTopic map[string][]raftfsm.ChangePartition, img *raftfsm.Image, p *Partition, now time.Time) map[string][]raftfsm.ChangePartition {
	if ch, ok := b.isrChange(img, p, now); ok {
		if byTopic == nil {
			byTopic = map[string][]raftfsm.ChangePartition{}
		}
		byTopic[p.topic] = append(byTopic[p.topic], ch)
	}
	return byTopic
}

// proposeISRChanges proposes the changes of byTopic, computed from img,
// and applies the image that follows once.
func (b *Broker) proposeISRChanges(ctx context.Context, img *raftfsm.Image, byTopic map[string][]raftfsm.ChangePartition) {
	if len(byTopic) == 0 {
		return
	}
	// Without a controller to take them, the round stops at the first
	// refusal: each proposal waited out its own timeout, so at 100 topics
	// the loop was stuck for minutes after the controller's node was
	// killed, and then proposed changes computed before the election
	// (issue 19). The next round (a tick later) proposes from what is
	// true then.
	for _, cmd := range isrCommands(img, byTopic) {
		if ctx.Err() != nil {
			break
		}
		if err := b.proposeISRs(ctx, cmd); errors.Is(err, raftfsm.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded) {
			break
		}
	}
	img, _ = b.meta.Image()
	b.Reconcile(img)
}

// isrCommands packs the ISR changes of each topic into commands: one
// ChangePartitions per topic (at most maxISRChangesPerCommand changes
// each), gathered into ChangePartitionsBatch commands within their bounds
// when the cluster's command version is 2 or later.
func isrCommands(img *raftfsm.Image, byTopic map[string][]raftfsm.ChangePartition) []raftfsm.Command {
	var perTopic []raftfsm.ChangePartitions
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		for changes := byTopic[topic]; len(changes) > 0; {
			k := min(len(changes), maxISRChangesPerCommand)
			perTopic = append(perTopic, raftfsm.ChangePartitions{Topic: topic, Changes: changes[:k]})
			changes = changes[k:]
		}
	}
	var out []raftfsm.Command
	if img == nil || img.CommandVersion < 2 {
		for i := range perTopic {
			out = append(out, raftfsm.Command{Version: 1, ChangePartitions: &perTopic[i]})
		}
		return out
	}
	var cur *raftfsm.ChangePartitionsBatch
	changes, partitions := 0, 0
	for _, cp := range perTopic {
		size := 0
		if t := img.Topics.Get(cp.Topic); t != nil {
			size = len(t.Partitions)
		}
		if cur != nil && (changes+len(cp.Changes) > maxISRBatchChanges || partitions+size > maxISRBatchPartitions) {
			cur = nil
		}
		if cur == nil {
			cur, changes, partitions = &raftfsm.ChangePartitionsBatch{}, 0, 0
			out = append(out, raftfsm.Command{ChangePartitionsBatch: cur})
		}
		cur.Topics = append(cur.Topics, cp)
		changes, partitions = changes+len(cp.Changes), partitions+size
	}
	return out
}

// isrChange is the ChangePartition that p's wanted ISR calls for.
func (b *Broker) isrChange(img *raftfsm.Image, p *Partition, now time.Time) (raftfsm.ChangePartition, bool) {
	if !p.isrChangeWanted(now, b.replicaLagMax) {
		return raftfsm.ChangePartition{}, false
	}
	isr, epoch, ok := p.wantedISR(now, b.replicaLagMax)
	if !ok {
		return raftfsm.ChangePartition{}, false
	}
	// Only alive brokers may join (KIP-841; the controller refuses the
	// rest): a fenced follower still fetching is left out, quietly.
	cur := p.currentISR()
	isr = slices.DeleteFunc(isr, func(id int32) bool {
		if id == b.id || slices.Contains(cur, id) {
			return false
		}
		br, ok := img.Brokers[id]
		return !ok || br.State != raftfsm.BrokerAlive
	})
	if slices.Equal(isr, cur) {
		return raftfsm.ChangePartition{}, false
	}
	return raftfsm.ChangePartition{Topic: p.topic, Partition: p.index, LeaderEpoch: p.leaderEpoch.Load(),
		PartitionEpoch: epoch, Leader: b.id, ISR: isr}, true
}

// proposeISRs proposes one command of ISR changes (isrCommands). The
// controller skips a change whose epochs are stale or whose new members are
// fenced (the metadata moved on since this image; the next image tells us)
// and applies the others. The error is Apply's, logged here.
func (b *Broker) proposeISRs(ctx context.Context, cmd raftfsm.Command) error {
	topics := []raftfsm.ChangePartitions{}
	if cmd.ChangePartitionsBatch != nil {
		topics = cmd.ChangePartitionsBatch.Topics
	} else if cmd.ChangePartitions != nil {
		topics = append(topics, *cmd.ChangePartitions)
	}
	changes := 0
	for _, t := range topics {
		changes += len(t.Changes)
	}
	first, last := "", ""
	if len(topics) > 0 {
		first, last = topics[0].Topic, topics[len(topics)-1].Topic
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := b.meta.Apply(actx, cmd)
	if err != nil {
		b.logger.Warn("propose ISR changes", "topic", first, "last_topic", last, "topics", len(topics), "partitions", changes, "err", err)
		return err
	}
	applied, _ := res.(int64)
	b.logger.Info("ISR changed", "topic", first, "last_topic", last, "topics", len(topics), "proposed", changes, "applied", applied)
	return nil
}
