package kafkadoor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/admin"
)

// The Kafka cluster admin APIs (kafkaproto.ClusterAdmin): each goes
// through the same server function as its HTTP twin.

var _ kafkaproto.ClusterAdmin = (*Backend)(nil)

// ElectLeaders is electPartitions, the code path of HTTP elect-leaders.
func (k *Backend) ElectLeaders(ctx context.Context, topic string, partitions []int32, unclean bool) (map[int32]error, error) {
	mode := admin.ElectPreferred
	if unclean {
		mode = admin.ElectUnclean
	}
	results, _, err := k.cfg.Admin.ElectPartitions(ctx, topic, partitions, mode, true)
	if err != nil {
		return nil, toKafka(err)
	}
	for p, e := range results {
		results[p] = toKafka(e)
	}
	return results, nil
}

// ReassignPartition is startReassignment / cancelReassignment, the code
// path of HTTP PUT / DELETE .../replicas.
func (k *Backend) ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) error {
	if err := admin.RefuseInternal(topic, "reassign"); err != nil {
		return toKafka(err)
	}
	var err error
	if replicas == nil {
		err = k.cfg.Admin.CancelReassignment(ctx, topic, partition)
	} else {
		err = k.cfg.Admin.StartReassignment(ctx, topic, partition, replicas)
	}
	return toKafka(err)
}

// LogDirs is this broker's partitions directory and the replicas in it.
func (k *Backend) LogDirs(context.Context) ([]kafkaproto.LogDir, error) {
	b := k.cfg.Broker
	if b == nil { // a controller-only node holds no partitions
		return nil, nil
	}
	dir, err := filepath.Abs(b.Dir())
	if err != nil {
		dir = b.Dir()
	}
	d := kafkaproto.LogDir{Path: dir, TotalBytes: -1, FreeBytes: -1, Err: toKafka(k.cfg.Storage.Err())}
	if total, free, ok := diskSpace(dir); ok {
		d.TotalBytes, d.FreeBytes = total, free
	}
	// Sizes and lags without opening an empty log or making a partition
	// not used since the start (issue 19); in topic and index order.
	logs := b.HostedLogs()
	d.Partitions = make([]kafkaproto.LogDirPartition, 0, len(logs))
	for _, l := range logs {
		d.Partitions = append(d.Partitions, kafkaproto.LogDirPartition{Topic: l.Topic, Partition: l.Partition,
			Size: l.Size, OffsetLag: l.OffsetLag})
	}
	return []kafkaproto.LogDir{d}, nil
}

// Quorum is the raft status: every voter's as it reports it, and the
// brokers that follow without voting as the active controller last heard
// from them.
func (k *Backend) Quorum(ctx context.Context) (kafkaproto.Quorum, error) {
	st := k.cfg.Meta.Status()
	q := kafkaproto.Quorum{LeaderID: st.LeaderID, LeaderEpoch: int32(st.Term), HighWatermark: int64(st.CommitIndex)}
	voters := map[int32]bool{}
	for _, c := range k.cfg.Meta.ControllerStatuses(ctx) {
		voters[c.ID] = true
		r := kafkaproto.QuorumReplica{ID: c.ID, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1, Address: c.Address}
		if c.Role != "unreachable" {
			r.LogEndOffset = int64(c.LastIndex)
		}
		q.Voters = append(q.Voters, r)
		if c.Role == "leader" {
			q.LeaderEpoch, q.HighWatermark = int32(c.Term), int64(c.CommitIndex)
		}
	}
	live, err := k.cfg.Meta.BrokerLiveness(ctx)
	if err != nil && !errors.Is(err, raftfsm.ErrNotLeader) {
		return q, toKafka(fmt.Errorf("quorum observers: %w", err))
	}
	img, _ := k.cfg.Meta.Image()
	for id := range img.Brokers {
		if voters[id] {
			continue
		}
		r := kafkaproto.QuorumReplica{ID: id, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		if l, ok := live[id]; ok && !l.LastHeartbeat.IsZero() {
			r.LogEndOffset, r.LastFetchMs = int64(l.AppliedIndex), l.LastHeartbeat.UnixMilli()
		}
		q.Observers = append(q.Observers, r)
	}
	slices.SortFunc(q.Voters, func(a, b kafkaproto.QuorumReplica) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(q.Observers, func(a, b kafkaproto.QuorumReplica) int { return cmp.Compare(a.ID, b.ID) })
	return q, nil
}

var _ kafkaproto.PartitionAssigner = (*Backend)(nil)

// CreateAssignedPartitions is CreatePartitions with the new partitions'
// replicas given.
func (k *Backend) CreateAssignedPartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	if err := admin.RefuseInternal(topic, "add partitions to"); err != nil {
		return toKafka(err)
	}
	return toKafka(k.cfg.Admin.CreateAssignedPartitions(ctx, topic, count, assignments, validateOnly))
}

var _ kafkaproto.ProducerStates = (*Backend)(nil)

// ActiveProducers lists the idempotent producers a led partition
// remembers, by id.
func (k *Backend) ActiveProducers(_ context.Context, topic string, idx int32) ([]kafkaproto.ActiveProducer, error) {
	p, err := k.cfg.Broker.Partition(topic, idx)
	if err != nil {
		return nil, toKafka(err)
	}
	out, err := p.ActiveProducers()
	return out, toKafka(err)
}
