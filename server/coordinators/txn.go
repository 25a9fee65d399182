package coordinators

// Transactions: package txn (the coordinator) wired into the broker.
// __transaction_state is its StateLog (created on first use like
// __consumer_offsets, compacted, replicated), the metadata image tells it
// which of that topic's partitions this broker leads, markers go to each
// partition's leader (here, or over the inter-broker port with
// WriteTxnMarkers), and a marker for a __consumer_offsets partition makes
// the offsets that TxnOffsetCommit staged there (txn.OffsetStage) the
// group's, or drops them. The Kafka door serves
// kafkaproto.TxnCoordinator from it (kafkadoor/txn.go; Txn is its
// kafkadoor.Txn).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/txn"

	"github.com/runnel/runnel/recordbatch"
)

const (
	defaultTxnStatePartitions = 3
	txnMarkerTimeout          = 10 * time.Second // one round of marker writes to another broker
	txnStoreTimeout           = 10 * time.Second // an acks=all append of a transaction's state
	txnLoadWait               = 5 * time.Second  // for the high watermark before a load
	txnLoadPoll               = 100 * time.Millisecond
)

// Txn is the transaction coordinator and what serves it on this broker.
// Its methods are safe for concurrent use.
type Txn struct {
	c          Config
	partitions int32 // of __transaction_state when this broker creates it
	coord      *txn.Coordinator
	groups     *groups.Coordinator // completes the offsets a marker ends
	cancel     context.CancelFunc
	done       chan struct{}
}

// StartTxn starts the transaction coordinator and its leadership follower;
// statePartitions is __transaction_state's partition count when this
// broker creates it (0: 3), g the group coordinator its offsets go to.
func StartTxn(c Config, tc txn.Config, statePartitions int32, g *groups.Coordinator) *Txn {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	t := &Txn{c: c, partitions: statePartitions, groups: g, done: make(chan struct{})}
	tc.Log, tc.Markers, tc.Cluster = txnLog{t}, txnMarkers{t}, txnCluster{t}
	t.coord = txn.New(tc)
	t.coord.Start()
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go func() {
		defer close(t.done)
		for {
			img, changed := c.Meta.Image()
			n, led := txnLeadership(img, c.NodeID)
			t.coord.Follow(n, led)
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return t
}

// Coordinator is the coordinator (nil on a nil Txn).
func (t *Txn) Coordinator() *txn.Coordinator {
	if t == nil {
		return nil
	}
	return t.coord
}

// Close stops the follower and the coordinator.
func (t *Txn) Close() {
	t.cancel()
	<-t.done
	t.coord.Close()
}

// txnLeadership returns the partition count of __transaction_state and the
// partitions node leads (partition -> leader epoch).
func txnLeadership(img *raftfsm.Image, node int32) (int32, map[int32]int32) {
	led := map[int32]int32{}
	t, ok := img.Topics.Lookup(admin.TransactionStateTopic)
	if !ok {
		return 0, led
	}
	for i, pm := range t.Partitions {
		if pm.Leader == node {
			led[int32(i)] = pm.LeaderEpoch
		}
	}
	return int32(len(t.Partitions)), led
}

// CoordinatorOf returns the broker coordinating transactional id id
// (creating __transaction_state on first use).
func (t *Txn) CoordinatorOf(ctx context.Context, id string) (int32, error) {
	if id == "" {
		return -1, fmt.Errorf("%w: empty transactional id", kafkaproto.ErrInvalidRequest)
	}
	img, _ := t.c.Meta.Image()
	top, ok := img.Topics.Lookup(admin.TransactionStateTopic)
	if !ok {
		if err := t.ensureStateTopic(ctx, img); err != nil {
			return -1, err
		}
		img, _ = t.c.Meta.Image()
		if top, ok = img.Topics.Lookup(admin.TransactionStateTopic); !ok {
			return -1, fmt.Errorf("%w: %s is not in this broker's metadata yet", kafkaproto.ErrCoordinatorNotAvailable, admin.TransactionStateTopic)
		}
	}
	if len(top.Partitions) == 0 {
		return -1, fmt.Errorf("%w: %s has no partitions", kafkaproto.ErrCoordinatorNotAvailable, admin.TransactionStateTopic)
	}
	leader := top.Partitions[txn.Partition(id, int32(len(top.Partitions)))].Leader
	if leader < 0 {
		return -1, fmt.Errorf("%w: the %s partition of %s has no leader", kafkaproto.ErrCoordinatorNotAvailable, admin.TransactionStateTopic, id)
	}
	return leader, nil
}

// ensureStateTopic creates __transaction_state: compacted, replication
// factor min(3, alive brokers), as __consumer_offsets.
func (t *Txn) ensureStateTopic(ctx context.Context, img *raftfsm.Image) error {
	n := t.partitions
	if n <= 0 {
		n = defaultTxnStatePartitions
	}
	rf := int16(min(3, admin.AliveBrokers(img)))
	_, err := t.c.Admin.CreateTopic(ctx, admin.TopicSpec{Name: admin.TransactionStateTopic, Partitions: n, ReplicationFactor: max(rf, 1),
		Configs: map[string]string{"cleanup.policy": "compact", "min.insync.replicas": fmt.Sprint(max(1, min(2, rf)))}}, false)
	if err != nil && !errors.Is(err, raftfsm.ErrTopicExists) {
		return fmt.Errorf("%w: create %s: %v", kafkaproto.ErrCoordinatorNotAvailable, admin.TransactionStateTopic, err)
	}
	return nil
}

// txnLog is __transaction_state for the coordinator.
type txnLog struct{ t *Txn }

func (l txnLog) Append(ctx context.Context, idx int32, key, value []byte) error {
	b := l.t.c.Broker
	if b == nil {
		return fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	p, err := b.Partition(admin.TransactionStateTopic, idx)
	if err != nil {
		return fmt.Errorf("%w: %v", kafkaproto.ErrNotCoordinator, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, txnStoreTimeout)
		defer cancel()
	}
	rec := recordbatch.NewRecord{Key: key, Value: value, Timestamp: l.t.c.Now().UnixMilli()}
	if _, err := p.Produce(ctx, recordbatch.Build([]recordbatch.NewRecord{rec}), -1); err != nil {
		return fmt.Errorf("store transaction state: %w", coordinatorAppendError(err))
	}
	return nil
}

func (l txnLog) Load(ctx context.Context, idx int32, fn func(key, value []byte)) error {
	b := l.t.c.Broker
	if b == nil {
		return fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	p, err := b.Partition(admin.TransactionStateTopic, idx)
	if err != nil {
		return err
	}
	// As for groups: below the high watermark an acknowledged record may
	// be missing, so wait for the followers (the caller retries).
	for deadline := time.Now().Add(txnLoadWait); p.HighWatermark() < p.LogEnd(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s-%d: high watermark %d below the log end %d", admin.TransactionStateTopic, idx, p.HighWatermark(), p.LogEnd())
		}
		if !sleepOrDone(ctx, txnLoadPoll) {
			return ctx.Err()
		}
	}
	for off := p.LogStart(); ; {
		res, err := p.ReadDecoded(off, 1000, 4<<20, false)
		for _, r := range res.Records {
			fn(r.Key, r.Value)
		}
		if err != nil {
			next, serr := offsetsLog{p}.BatchEnd(res.Next)
			if serr != nil {
				return fmt.Errorf("read %s-%d at %d: %w", admin.TransactionStateTopic, idx, res.Next, err)
			}
			l.t.c.Logger.Warn("skipping unreadable __transaction_state batch", "partition", idx, "offset", res.Next, "err", err)
			res.Next = next
		}
		if res.Next <= off || res.Next >= res.HWM {
			return nil
		}
		off = res.Next
	}
}

func sleepOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// txnCluster is the rest of the broker, as the coordinator asks for it.
type txnCluster struct{ t *Txn }

func (c txnCluster) AllocateProducerID(ctx context.Context) (int64, error) {
	return c.t.c.Admin.AllocateProducerID(ctx)
}

func (c txnCluster) PartitionExists(t kafkaproto.TopicPartition) bool {
	if t.Topic == admin.TransactionStateTopic {
		return false // never part of a transaction
	}
	img, _ := c.t.c.Meta.Image()
	top, ok := img.Topics.Lookup(t.Topic)
	return ok && t.Partition >= 0 && int(t.Partition) < len(top.Partitions)
}

func (c txnCluster) GroupPartition(ctx context.Context, group string) (kafkaproto.TopicPartition, error) {
	if c.t.groups == nil {
		return kafkaproto.TopicPartition{}, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	p, err := c.t.groups.OffsetsPartition(ctx, group)
	if err != nil {
		return kafkaproto.TopicPartition{}, err
	}
	return kafkaproto.TopicPartition{Topic: offsetsTopic, Partition: p}, nil
}

// txnMarkers writes markers where each partition's leader is.
type txnMarkers struct{ t *Txn }

func (m txnMarkers) WriteMarkers(ctx context.Context, mk txn.Marker, parts []kafkaproto.TopicPartition) []error {
	errs := make([]error, len(parts))
	img, _ := m.t.c.Meta.Image()
	remote := map[int32][]int{}
	for i, t := range parts {
		leader := int32(-1)
		if top, ok := img.Topics.Lookup(t.Topic); ok && int(t.Partition) < len(top.Partitions) && t.Partition >= 0 {
			leader = top.Partitions[t.Partition].Leader
		}
		top, ok := img.Topics.Lookup(t.Topic)
		switch {
		case !ok || t.Partition < 0 || int(t.Partition) >= len(top.Partitions):
			// Deleted since it joined the transaction: nothing to end
			// there (Kafka skips it too), and retrying would keep the
			// transaction preparing forever.
			errs[i] = nil
		case leader < 0:
			errs[i] = fmt.Errorf("%w: %s-%d", kafkaproto.ErrLeaderNotAvailable, t.Topic, t.Partition)
		case leader == m.t.c.NodeID:
			errs[i] = m.t.WriteMarker(ctx, mk, t)
		default:
			remote[leader] = append(remote[leader], i)
		}
	}
	for leader, idx := range remote {
		ts := make([]kafkaproto.TopicPartition, len(idx))
		for j, i := range idx {
			ts[j] = parts[i]
		}
		for j, err := range m.t.sendMarkers(ctx, leader, mk, ts) {
			errs[idx[j]] = err
		}
	}
	return errs
}

// WriteMarker ends a transaction in a partition this broker leads: in
// __consumer_offsets the staged offsets of the groups it holds, elsewhere
// a control batch.
func (t *Txn) WriteMarker(ctx context.Context, mk txn.Marker, tp kafkaproto.TopicPartition) error {
	if tp.Topic == offsetsTopic {
		return t.completeOffsets(ctx, mk.ProducerID, mk.Commit, tp.Partition)
	}
	return t.appendMarker(ctx, mk, tp)
}

// appendMarker appends a marker to a data partition led here
// (broker.WriteTxnMarker: acks=all).
func (t *Txn) appendMarker(ctx context.Context, mk txn.Marker, tp kafkaproto.TopicPartition) error {
	if t.c.Broker == nil {
		return fmt.Errorf("%w: not a broker", kafkaproto.ErrNotLeader)
	}
	typ := recordbatch.ControlAbort
	if mk.Commit {
		typ = recordbatch.ControlCommit
	}
	_, err := t.c.Broker.WriteTxnMarker(ctx, tp.Topic, tp.Partition, recordbatch.Marker{ProducerID: mk.ProducerID,
		ProducerEpoch: mk.Epoch, CoordinatorEpoch: mk.CoordinatorEpoch, Type: typ})
	return err
}

// sendMarkers asks broker leader to write mk into parts
// (WriteTxnMarkers over the inter-broker port), one error per partition.
func (t *Txn) sendMarkers(ctx context.Context, leader int32, mk txn.Marker, parts []kafkaproto.TopicPartition) []error {
	errs := make([]error, len(parts))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	ctx, cancel := context.WithTimeout(ctx, txnMarkerTimeout)
	defer cancel()
	nc, err := t.c.DialBroker(ctx, leader)
	if err != nil {
		return fail(fmt.Errorf("%w: broker %d: %v", kafkaproto.ErrNotLeader, leader, err))
	}
	kc := kafkaconn.New(nc, fmt.Sprintf("runnel-txn-%d", t.c.NodeID))
	defer kc.Close()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	wm := kmsg.NewWriteTxnMarkersRequestMarker()
	wm.ProducerID, wm.ProducerEpoch, wm.Committed, wm.CoordinatorEpoch = mk.ProducerID, mk.Epoch, mk.Commit, mk.CoordinatorEpoch
	at := map[kafkaproto.TopicPartition]int{}
	for i, tp := range parts {
		at[tp] = i
		if n := len(wm.Topics); n == 0 || wm.Topics[n-1].Topic != tp.Topic {
			wt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			wt.Topic = tp.Topic
			wm.Topics = append(wm.Topics, wt)
		}
		wt := &wm.Topics[len(wm.Topics)-1]
		wt.Partitions = append(wt.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, wm)
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	if err := kc.Do(ctx, req, resp); err != nil {
		return fail(fmt.Errorf("%w: broker %d: %v", kafkaproto.ErrNotLeader, leader, err))
	}
	for i := range errs {
		errs[i] = fmt.Errorf("%w: broker %d did not answer for it", kafkaproto.ErrNotLeader, leader)
	}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if i, ok := at[kafkaproto.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok {
					errs[i] = kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
	}
	return errs
}

// completeOffsets ends producer pid's staged offsets of the groups whose
// offsets live in partition idx of __consumer_offsets (led here).
func (t *Txn) completeOffsets(ctx context.Context, pid int64, commit bool, idx int32) error {
	if t.groups == nil {
		return fmt.Errorf("%w: not a broker", kafkaproto.ErrNotLeader)
	}
	return t.groups.CompleteTxnOffsets(ctx, pid, commit, idx)
}
