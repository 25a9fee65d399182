package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
)

// kafkaBackend is the server as the Kafka listener sees it.
type kafkaBackend struct {
	s *Server

	mu       sync.Mutex
	cached   *kafkaproto.Cluster // built from cachedOf; guarded by mu
	cachedOf *raftfsm.Image      // guarded by mu
}

var (
	_ kafkaproto.Broker             = (*kafkaBackend)(nil)
	_ kafkaproto.ReplicatedProducer = (*kafkaBackend)(nil)
	_ kafkaproto.TxnMarkerWriter    = (*kafkaBackend)(nil)
)

// kafkaErrors is the one table from server errors to the listener's sentinels.
var kafkaErrors = []struct{ from, to error }{
	{broker.ErrUnknownTopic, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrUnknownTopic, kafkaproto.ErrUnknownTopicOrPartition},
	{broker.ErrUnknownPartition, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrTopicExists, kafkaproto.ErrTopicExists},
	{admin.ErrInvalidTopicName, kafkaproto.ErrInvalidTopic},
	{broker.ErrInvalidConfig, kafkaproto.ErrInvalidConfig},
	{admin.ErrInvalidPartitions, kafkaproto.ErrInvalidPartitions},
	{raftfsm.ErrInvalidPartitions, kafkaproto.ErrInvalidPartitions},
	{admin.ErrInvalidReplicas, kafkaproto.ErrInvalidReplicationFactor},
	{raftfsm.ErrNotEnoughBrokers, kafkaproto.ErrInvalidReplicationFactor},
	{admin.ErrInternalTopic, kafkaproto.ErrInvalidTopic},
	{raftfsm.ErrPolicyViolation, kafkaproto.ErrPolicyViolation},
	{broker.ErrTooLarge, kafkaproto.ErrMessageTooLarge},
	{segments.ErrInflatedTooLarge, kafkaproto.ErrInvalidRecord},
	{segments.ErrInvalidRecord, kafkaproto.ErrInvalidRecord},
	{segments.ErrBatchTooLarge, kafkaproto.ErrMessageTooLarge},
	{broker.ErrCorruptBatch, kafkaproto.ErrCorruptMessage},
	{segments.ErrCorruptBatch, kafkaproto.ErrCorruptMessage},
	{broker.ErrOffsetOutOfRange, kafkaproto.ErrOffsetOutOfRange},
	{broker.ErrUnknownProducerID, kafkaproto.ErrUnknownProducerID},
	{broker.ErrOutOfOrderSequence, kafkaproto.ErrOutOfOrderSequence},
	{broker.ErrInvalidProducerEpoch, kafkaproto.ErrInvalidProducerEpoch},
	{broker.ErrNotLeader, kafkaproto.ErrNotLeader},
	{broker.ErrNotEnoughReplicas, kafkaproto.ErrNotEnoughReplicas},
	{broker.ErrShuttingDown, kafkaproto.ErrNotLeader},
	{raftfsm.ErrNotLeader, kafkaproto.ErrNotController},
	{context.DeadlineExceeded, kafkaproto.ErrRequestTimedOut},
	{broker.ErrStorage, kafkaproto.ErrStorage},
	{segments.ErrStorage, kafkaproto.ErrStorage},
	// Cluster admin (kafkaclusteradmin.go).
	{admin.ErrElectionNotNeeded, kafkaproto.ErrElectionNotNeeded},
	{admin.ErrPreferredLeaderNotAvailable, kafkaproto.ErrPreferredLeaderNotAvailable},
	{admin.ErrEligibleLeadersNotAvailable, kafkaproto.ErrEligibleLeadersNotAvailable},
	{raftfsm.ErrUnknownPartition, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrInvalidAssignment, kafkaproto.ErrInvalidReplicaAssignment},
	{raftfsm.ErrUnknownBroker, kafkaproto.ErrInvalidReplicaAssignment},
	{raftfsm.ErrNoReassignment, kafkaproto.ErrNoReassignmentInProgress},
	{raftfsm.ErrInvalidConfig, kafkaproto.ErrInvalidConfig},
	// Transaction markers (txnmarkers.go).
	{broker.ErrCoordinatorFenced, kafkaproto.ErrTransactionCoordinatorFenced},
}

func toKafkaError(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range kafkaErrors {
		if errors.Is(err, e.from) {
			return &translatedError{kind: e.to, err: err}
		}
	}
	return err
}

// Cluster converts the metadata image, once per image.
func (k *kafkaBackend) Cluster() (*kafkaproto.Cluster, <-chan struct{}) {
	img, changed := k.s.meta.Image()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cachedOf != img {
		k.cached, k.cachedOf = k.convert(img), img
	}
	return k.cached, changed
}

func (k *kafkaBackend) convert(img *raftfsm.Image) *kafkaproto.Cluster {
	c := &kafkaproto.Cluster{ClusterID: img.ClusterID, ControllerID: k.s.meta.Status().LeaderID, Self: k.s.cfg.NodeID}
	down := map[int32]bool{}
	for _, b := range img.Brokers {
		if b.State == raftfsm.BrokerFenced {
			down[b.ID] = true
			continue
		}
		bi := kafkaproto.BrokerInfo{ID: b.ID, Rack: b.Rack}
		bi.Host, bi.Port = splitKafkaAddr(b.KafkaAddr)
		bi.SSLHost, bi.SSLPort = splitKafkaAddr(b.KafkaTLSAddr)
		if bi.Port == 0 && bi.SSLPort == 0 {
			continue
		}
		c.Brokers = append(c.Brokers, bi)
	}
	sort.Slice(c.Brokers, func(i, j int) bool { return c.Brokers[i].ID < c.Brokers[j].ID })
	for _, t := range img.Topics.All() {
		ti := kafkaproto.TopicInfo{Name: t.Name, ID: t.ID, Internal: admin.IsInternal(t.Name)}
		for i, p := range t.Partitions {
			pi := kafkaproto.PartitionInfo{Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, Adding: p.AddingReplicas, Removing: p.RemovingReplicas}
			for _, r := range p.Replicas {
				if down[r] {
					pi.Offline = append(pi.Offline, r)
				}
			}
			ti.Partitions = append(ti.Partitions, pi)
		}
		c.Topics = append(c.Topics, ti)
	}
	sort.Slice(c.Topics, func(i, j int) bool { return c.Topics[i].Name < c.Topics[j].Name })
	c.IndexTopicIDs()
	return c
}

func (k *kafkaBackend) Produce(ctx context.Context, topic string, partition int32, batches []byte, acks int16) (kafkaproto.ProduceResult, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return kafkaproto.ProduceResult{}, toKafkaError(err)
	}
	p, err := k.s.broker.Partition(topic, partition)
	if err != nil {
		return kafkaproto.ProduceResult{}, toKafkaError(err)
	}
	res, err := p.Produce(ctx, batches, int(acks))
	if err != nil {
		return kafkaproto.ProduceResult{}, toKafkaError(err)
	}
	if !res.Duplicate {
		k.s.metrics.Produced(topic, int(res.LastOffset-res.BaseOffset+1), len(batches))
	}
	return kafkaproto.ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStart}, nil
}

// AppendForAcks splits an acks=all produce so the listener can read a
// connection's next requests while this one waits for the in-sync replicas.
func (k *kafkaBackend) AppendForAcks(ctx context.Context, topic string, partition int32, batches []byte) (kafkaproto.ProduceResult, func(context.Context) error, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return kafkaproto.ProduceResult{}, nil, toKafkaError(err)
	}
	p, err := k.s.broker.Partition(topic, partition)
	if err != nil {
		return kafkaproto.ProduceResult{}, nil, toKafkaError(err)
	}
	res, wait, err := p.AppendForAcks(batches, nil)
	if err != nil {
		return kafkaproto.ProduceResult{}, nil, toKafkaError(err)
	}
	if !res.Duplicate {
		k.s.metrics.Produced(topic, int(res.LastOffset-res.BaseOffset+1), len(batches))
	}
	return kafkaproto.ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStart},
		func(ctx context.Context) error { return toKafkaError(wait(ctx)) }, nil
}

func (k *kafkaBackend) Fetch(ctx context.Context, req kafkaproto.FetchRequest) (kafkaproto.FetchResult, error) {
	p, err := k.s.broker.Partition(req.Topic, req.Partition)
	if err != nil {
		return kafkaproto.FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}, toKafkaError(err)
	}
	if err := p.CheckLeaderEpoch(req.CurrentLeaderEpoch); err != nil {
		return kafkaproto.FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}, err
	}
	var chunk segments.Chunk
	var abortedList []kafkaproto.AbortedTransaction
	if req.ReplicaID >= 0 {
		// A follower fetching (the listener let it through the
		// inter-broker door under its own id): its offset is its log
		// end; it reads up to ours.
		if err := p.FollowerFetched(req.ReplicaID, req.Offset, req.CurrentLeaderEpoch); err != nil {
			hwm := p.HighWatermark()
			return kafkaproto.FetchResult{HighWatermark: hwm, LastStableOffset: hwm, LogStartOffset: p.Log().StartOffset()}, toKafkaError(err)
		}
		chunk, err = p.ReadReplica(req.Offset, req.MaxBytes)
	} else if req.ReadCommitted {
		var aborted []segments.AbortedTxn
		chunk, _, aborted, err = p.ReadCommitted(req.Offset, req.MaxBytes)
		abortedList = broker.ToKafkaAborted(aborted)
	} else {
		chunk, err = p.Read(req.Offset, req.MaxBytes)
	}
	hwm := p.HighWatermark()
	res := kafkaproto.FetchResult{HighWatermark: hwm, LastStableOffset: hwm, LogStartOffset: p.Log().StartOffset(),
		AbortedTransactions: abortedList}
	if lso, lerr := p.LSO(); lerr == nil {
		res.LastStableOffset = min(lso, hwm)
	}
	if err != nil {
		return res, toKafkaError(err)
	}
	if chunk != nil { // nil: read_committed at or past the LSO
		res.Records = chunk
		k.s.metrics.Consumed(req.Topic, 0, chunk.Len())
	}
	return res, nil
}

func (k *kafkaBackend) Notify(topic string, partition int32) <-chan struct{} {
	p, err := k.s.broker.Lookup(topic, partition)
	if err != nil {
		return nil
	}
	return p.Changed()
}

func (k *kafkaBackend) ListOffset(ctx context.Context, topic string, partition int32, timestamp int64, currentLeaderEpoch int32, readCommitted bool) (int64, int64, int32, error) {
	p, err := k.s.broker.Partition(topic, partition)
	if err != nil {
		return -1, -1, -1, toKafkaError(err)
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, -1, err
	}
	epoch := p.LeaderEpoch()
	switch timestamp {
	case -2:
		return p.Log().StartOffset(), -1, epoch, nil
	case -1:
		if readCommitted {
			lso, err := p.LSO()
			return lso, -1, epoch, toKafkaError(err)
		}
		return p.HighWatermark(), -1, epoch, nil
	case -3:
		off, ts, err := p.MaxTimestamp()
		return off, ts, epoch, toKafkaError(err)
	}
	off, ts, ok, err := p.Log().OffsetForTimestamp(timestamp)
	if err != nil {
		return -1, -1, -1, toKafkaError(err)
	}
	limit := p.HighWatermark()
	if readCommitted {
		if limit, err = p.LSO(); err != nil {
			return -1, -1, -1, toKafkaError(err)
		}
	}
	if !ok || off >= limit {
		return -1, -1, -1, nil
	}
	return off, ts, epoch, nil
}

func (k *kafkaBackend) EndOffsetForEpoch(ctx context.Context, topic string, partition int32, currentLeaderEpoch, leaderEpoch int32) (int32, int64, error) {
	p, err := k.s.broker.Partition(topic, partition)
	if err != nil {
		return -1, -1, toKafkaError(err)
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	epoch, end, err := p.EndOffsetForEpoch(leaderEpoch)
	if err != nil {
		return -1, -1, toKafkaError(err)
	}
	return epoch, end, nil
}

func (k *kafkaBackend) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if err := admin.RefuseInternal(topic, "delete records of"); err != nil {
		return -1, toKafkaError(err)
	}
	p, err := k.s.broker.Partition(topic, partition)
	if err != nil {
		return -1, toKafkaError(err)
	}
	hwm := p.HighWatermark()
	if offset == -1 {
		offset = hwm
	}
	if offset < 0 || offset > hwm {
		return -1, fmt.Errorf("%w: %d above the high watermark %d", kafkaproto.ErrOffsetOutOfRange, offset, hwm)
	}
	if err := p.Log().DeleteRecordsBefore(offset); err != nil {
		return -1, toKafkaError(err)
	}
	return p.Log().StartOffset(), nil
}

func (k *kafkaBackend) CreateTopic(ctx context.Context, spec kafkaproto.TopicSpec, validateOnly bool) error {
	if err := admin.RefuseInternal(spec.Name, "create"); err != nil {
		return toKafkaError(err)
	}
	_, err := k.s.admin.CreateTopic(ctx, admin.TopicSpec{Name: spec.Name, Partitions: spec.Partitions,
		ReplicationFactor: spec.ReplicationFactor, Configs: spec.Configs, Assignments: spec.Assignments}, validateOnly)
	return toKafkaError(err)
}

func (k *kafkaBackend) DeleteTopic(ctx context.Context, name string) error {
	if err := admin.RefuseInternal(name, "delete"); err != nil {
		return toKafkaError(err)
	}
	return toKafkaError(k.s.admin.DeleteTopic(ctx, name))
}

func (k *kafkaBackend) CreatePartitions(ctx context.Context, topic string, count int32, validateOnly bool) error {
	if err := admin.RefuseInternal(topic, "add partitions to"); err != nil {
		return toKafkaError(err)
	}
	return toKafkaError(k.s.admin.CreatePartitions(ctx, topic, count, validateOnly))
}

func (k *kafkaBackend) DescribeConfigs(ctx context.Context, res kafkaproto.ConfigResource) ([]kafkaproto.ConfigEntry, error) {
	if res.Type == kafkaproto.ResourceBrokerLogger {
		if err := k.checkBrokerResource(res.Name); err != nil {
			return nil, err
		}
		return k.s.brokerLoggers(), nil
	}
	if res.Type == kafkaproto.ResourceBroker {
		if res.Name == "" { // cluster-wide dynamic defaults: runnel has none
			return nil, nil
		}
		if err := k.checkBrokerResource(res.Name); err != nil {
			return nil, err
		}
		return k.s.brokerConfigs(), nil
	}
	_, t, ok := k.s.admin.LookupTopic(ctx, res.Name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", kafkaproto.ErrUnknownTopicOrPartition, res.Name)
	}
	var out []kafkaproto.ConfigEntry
	for _, def := range broker.TopicConfigDefs() {
		v, set := t.Configs[def.Name]
		src := kafkaproto.SourceTopic
		if !set {
			v, src = def.Def, kafkaproto.SourceDefault
		}
		val := v
		e := kafkaproto.ConfigEntry{Name: def.Name, Value: &val, Source: src, Type: def.Kind, Doc: def.Doc}
		if def.NotApplied != "" {
			e.ReadOnly, e.Doc = true, "accepted and stored, not applied: "+def.NotApplied
		}
		e.Synonyms = broker.TopicConfigSynonyms(def, t.Configs)
		out = append(out, e)
	}
	return out, nil
}

func (k *kafkaBackend) AlterConfigs(ctx context.Context, res kafkaproto.ConfigResource, ops []kafkaproto.ConfigOp, validateOnly bool) error {
	if res.Type == kafkaproto.ResourceBrokerLogger {
		if err := k.checkBrokerResource(res.Name); err != nil {
			return err
		}
		return k.s.alterBrokerLoggers(ops, validateOnly)
	}
	if res.Type == kafkaproto.ResourceBroker {
		if res.Name == "" {
			return fmt.Errorf("%w: cluster-wide broker configs are not supported; name the broker", kafkaproto.ErrInvalidRequest)
		}
		if err := k.checkBrokerResource(res.Name); err != nil {
			return err
		}
		return k.s.alterBrokerConfigs(ops, validateOnly)
	}
	if err := admin.RefuseInternal(res.Name, "reconfigure"); err != nil {
		return toKafkaError(err)
	}
	changes, listOps, err := k.s.topicConfigChanges(ctx, res.Name, ops, validateOnly)
	if err != nil {
		return err
	}
	_, err = k.s.admin.AlterTopicConfigs(ctx, res.Name, changes, listOps, validateOnly)
	return toKafkaError(err)
}

// checkBrokerResource: a broker config resource must name this broker,
// as in Kafka, where each broker answers for its own configs.
func (k *kafkaBackend) checkBrokerResource(name string) error {
	if name != strconv.Itoa(int(k.s.cfg.NodeID)) {
		return fmt.Errorf("%w: unexpected broker id %q, this is broker %d", kafkaproto.ErrInvalidRequest, name, k.s.cfg.NodeID)
	}
	return nil
}

func (k *kafkaBackend) InitProducerID(ctx context.Context, transactionalID *string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	if transactionalID != nil {
		return k.initTransactionalProducer(ctx, *transactionalID, timeout, pid, epoch)
	}
	// A non-transactional producer always gets a new id at epoch 0, as
	// Kafka's transaction coordinator answers it, whatever id and epoch it
	// names (KIP-360's bump is for transactional ids): bumping the epoch of
	// the id a request names would let any client fence any producer.
	id, err := k.s.admin.AllocateProducerID(ctx)
	if err != nil {
		return -1, -1, toKafkaError(err)
	}
	return id, 0, nil
}

// splitKafkaAddr splits an advertised host:port; port 0 when there is none.
func splitKafkaAddr(addr string) (string, int32) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil || port <= 0 {
		return "", 0
	}
	return host, int32(port)
}
