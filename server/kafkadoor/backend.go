// Package kafkadoor is the Kafka door's adapter: Backend implements
// kafkaproto's backend interfaces (Broker and its optional extensions:
// groups, transactions, cluster admin, quotas, producer states, markers
// from other brokers) over the node's packages: the partitions
// (server/broker), the metadata changes both doors share (server/admin),
// the coordinators (server/groups, server/txn), the quotas (server/quota)
// and the metrics (server/metrics). It owns no state of its own but the
// cached Kafka view of the metadata image and the dynamic broker configs
// (log.level), and translates the packages' errors into kafkaproto's
// sentinels through one table (kafkaErrors).
//
// The root package server builds one Backend per broker (after the broker
// and the coordinators started) and hands it to kafkaproto.NewServer; this
// package never imports server.
//
// Goroutines: none; every method runs on the listener's request
// goroutines. Lock order: Backend.mu (the cached cluster) and
// dynamicConfigs.mu are leaves; neither is held across a call into
// another package.
package kafkadoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/access"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/topicconfig"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/metrics"
	"github.com/runnel/runnel/server/quota"
	"github.com/runnel/runnel/server/txn"

	"github.com/runnel/runnel/recordbatch"
)

// Metadata is the metadata node as the Kafka door reads it; quorum.Node
// implements it.
type Metadata interface {
	Image() (*raftfsm.Image, <-chan struct{})
	Status() raftfsm.Status
	ControllerStatuses(ctx context.Context) []raftfsm.Status
	BrokerLiveness(ctx context.Context) (map[int32]raftfsm.Liveness, error)
	Apply(ctx context.Context, cmd raftfsm.Command) (any, error)
	CatchUp(ctx context.Context) error
}

// Config is what a Backend is made from; every field is set (Groups and
// Txn too: the Kafka door runs on brokers only).
type Config struct {
	NodeID  int32
	Meta    Metadata
	Broker  *broker.Broker
	Storage *broker.StorageHealth // the storage loop's last view (LogDirs)
	Admin   *admin.Admin
	Access  *access.Access // ACLs, users (SASL)
	Groups  *groups.Coordinator
	Txn     Txn
	Quotas  *quota.Node
	Metrics *metrics.Metrics
	// BrokerConfigs are the node's read-only broker configs (the serve
	// flags with a Kafka name), sorted or not; LogLevel, when set, is
	// the level the node's logger reads (log.level, dynamic).
	BrokerConfigs []StaticConfig
	LogLevel      *slog.LevelVar
	Logger        *slog.Logger
}

// Txn is the node's transaction coordinator as the Kafka door reaches it.
type Txn interface {
	// Coordinator is the coordinator (nil: not available on this node).
	Coordinator() *txn.Coordinator
	// CoordinatorOf names the broker coordinating a transactional id.
	CoordinatorOf(ctx context.Context, id string) (int32, error)
	// WriteMarker ends a transaction in a partition led here.
	WriteMarker(ctx context.Context, mk txn.Marker, t kafkaproto.TopicPartition) error
}

// Backend is the node as the Kafka listener sees it. Safe for concurrent use.
type Backend struct {
	cfg     Config
	dynamic dynamicConfigs

	mu       sync.Mutex
	cached   *kafkaproto.Cluster // built from cachedOf; guarded by mu
	cachedOf *raftfsm.Image      // guarded by mu
	// The topics cached.Topics were converted from, index for index, and
	// the fenced brokers of cachedOf: the next image's unchanged topics
	// (the same *raftfsm.Topic) keep their conversion. Guarded by mu.
	cachedSrc  []*raftfsm.Topic
	cachedDown map[int32]bool
}

var (
	_ kafkaproto.Broker             = (*Backend)(nil)
	_ kafkaproto.ReplicatedProducer = (*Backend)(nil)
	_ kafkaproto.TxnMarkerWriter    = (*Backend)(nil)
	_ kafkaproto.MetadataCatchUp    = (*Backend)(nil)
	_ kafkaproto.TopicLookup        = (*Backend)(nil)
)

// New returns the Kafka door's backend over cfg.
func New(cfg Config) *Backend {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := &Backend{cfg: cfg}
	if cfg.LogLevel != nil {
		k.dynamic.startLevel = cfg.LogLevel.Level()
	}
	return k
}

// translated is an error of a package under the Kafka sentinel it maps to
// (errors.Is finds both).
type translated struct{ kind, err error }

func (e *translated) Error() string   { return e.err.Error() }
func (e *translated) Unwrap() []error { return []error{e.kind, e.err} }

// kafkaErrors is the one table from the node's errors to the listener's sentinels.
var kafkaErrors = []struct{ from, to error }{
	{broker.ErrUnknownTopic, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrUnknownTopic, kafkaproto.ErrUnknownTopicOrPartition},
	{broker.ErrUnknownPartition, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrTopicExists, kafkaproto.ErrTopicExists},
	{admin.ErrInvalidTopicName, kafkaproto.ErrInvalidTopic},
	{topicconfig.ErrInvalid, kafkaproto.ErrInvalidConfig},
	{admin.ErrInvalidPartitions, kafkaproto.ErrInvalidPartitions},
	{raftfsm.ErrInvalidPartitions, kafkaproto.ErrInvalidPartitions},
	{admin.ErrInvalidReplicas, kafkaproto.ErrInvalidReplicationFactor},
	{raftfsm.ErrNotEnoughBrokers, kafkaproto.ErrInvalidReplicationFactor},
	{admin.ErrInternalTopic, kafkaproto.ErrInvalidTopic},
	{raftfsm.ErrPolicyViolation, kafkaproto.ErrPolicyViolation},
	{broker.ErrTooLarge, kafkaproto.ErrMessageTooLarge},
	{recordbatch.ErrInflatedTooLarge, kafkaproto.ErrInvalidRecord},
	{recordbatch.ErrInvalidRecord, kafkaproto.ErrInvalidRecord},
	{recordbatch.ErrBatchTooLarge, kafkaproto.ErrMessageTooLarge},
	{recordbatch.ErrCorruptBatch, kafkaproto.ErrCorruptMessage},
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
	// Cluster admin (clusteradmin.go).
	{admin.ErrElectionNotNeeded, kafkaproto.ErrElectionNotNeeded},
	{admin.ErrPreferredLeaderNotAvailable, kafkaproto.ErrPreferredLeaderNotAvailable},
	{admin.ErrEligibleLeadersNotAvailable, kafkaproto.ErrEligibleLeadersNotAvailable},
	{raftfsm.ErrUnknownPartition, kafkaproto.ErrUnknownTopicOrPartition},
	{raftfsm.ErrInvalidAssignment, kafkaproto.ErrInvalidReplicaAssignment},
	{raftfsm.ErrUnknownBroker, kafkaproto.ErrInvalidReplicaAssignment},
	{raftfsm.ErrNoReassignment, kafkaproto.ErrNoReassignmentInProgress},
	{raftfsm.ErrInvalidConfig, kafkaproto.ErrInvalidConfig},
	// Transaction markers (broker/txnmarkers.go).
	{broker.ErrCoordinatorFenced, kafkaproto.ErrTransactionCoordinatorFenced},
}

// toKafka translates err for the listener (nil stays nil; an error the
// table does not name goes as is).
func toKafka(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range kafkaErrors {
		if errors.Is(err, e.from) {
			return &translated{kind: e.to, err: err}
		}
	}
	return err
}

// Cluster converts the metadata image, once per image, and of each image
// only the topics that changed since the one converted before it (a topic
// the FSM left alone is the same *raftfsm.Topic in both): every leader
// move or ISR change publishes an image, and converting all partitions
// again for the next Metadata request or NOT_LEADER hint cost 19-34 ms at
// 100,000 partitions (BenchmarkClusterAfterOneTopicChange).
func (k *Backend) Cluster() (*kafkaproto.Cluster, <-chan struct{}) {
	img, changed := k.cfg.Meta.Image()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cachedOf != img {
		k.cached, k.cachedSrc, k.cachedDown = k.convert(img, k.cached, k.cachedSrc, k.cachedDown)
		k.cachedOf = img
	}
	return k.cached, changed
}

// convert makes the Kafka view of img, reusing prev's conversion of every
// topic that is still prevSrc's (and all of them only if the fenced
// brokers, which mark replicas offline, are prevDown). It returns the
// topics converted from, in the view's order, and img's fenced brokers.
func (k *Backend) convert(img *raftfsm.Image, prev *kafkaproto.Cluster, prevSrc []*raftfsm.Topic, prevDown map[int32]bool) (*kafkaproto.Cluster, []*raftfsm.Topic, map[int32]bool) {
	c := &kafkaproto.Cluster{ClusterID: img.ClusterID, ControllerID: k.cfg.Meta.Status().LeaderID, Self: k.cfg.NodeID}
	down := fencedBrokers(img)
	if prev == nil || !maps.Equal(down, prevDown) {
		prev, prevSrc = nil, nil
	}
	for _, b := range img.Brokers {
		if down[b.ID] {
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
	// Sized: growth by appends is garbage at 1,000,000 partitions. The
	// image yields topics in name order, the order of the view, so one
	// walk along prevSrc finds each topic's previous conversion.
	c.Topics = make([]kafkaproto.TopicInfo, 0, img.Topics.Len())
	src := make([]*raftfsm.Topic, 0, img.Topics.Len())
	j := 0
	for name, t := range img.Topics.All() {
		for j < len(prevSrc) && prevSrc[j].Name < name {
			j++
		}
		if j < len(prevSrc) && prevSrc[j] == t {
			c.Topics = append(c.Topics, prev.Topics[j])
		} else {
			c.Topics = append(c.Topics, topicInfo(t, down))
		}
		src = append(src, t)
	}
	c.IndexTopicIDs()
	return c, src, down
}

// LookupTopic implements kafkaproto.TopicLookup: one topic of the current
// image, converted alone (Cluster converts every topic after each change).
func (k *Backend) LookupTopic(name string) (kafkaproto.TopicInfo, bool) {
	img, _ := k.cfg.Meta.Image()
	t, ok := img.Topics.Lookup(name)
	if !ok {
		return kafkaproto.TopicInfo{}, false
	}
	return topicInfo(t, fencedBrokers(img)), true
}

// fencedBrokers is the set of img's fenced brokers.
func fencedBrokers(img *raftfsm.Image) map[int32]bool {
	down := map[int32]bool{}
	for _, b := range img.Brokers {
		if b.State == raftfsm.BrokerFenced {
			down[b.ID] = true
		}
	}
	return down
}

// topicInfo converts one topic; down are the fenced brokers. The
// partitions share their replica and ISR arrays with the image, and those
// with one offline replica share a one-element array per fenced broker:
// after a kill -9 every partition of the broker's has one, and a fresh
// array for each was most of a topic's allocations, converted again on
// every change of the topic (issue 19). Nothing writes to them.
func topicInfo(t *raftfsm.Topic, down map[int32]bool) kafkaproto.TopicInfo {
	ti := kafkaproto.TopicInfo{Name: t.Name, ID: t.ID, Internal: admin.IsInternal(t.Name),
		Partitions: make([]kafkaproto.PartitionInfo, 0, len(t.Partitions))}
	var single map[int32][]int32 // fenced broker -> {broker}, made on first use
	for i, p := range t.Partitions {
		pi := kafkaproto.PartitionInfo{Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR, Adding: p.AddingReplicas(), Removing: p.RemovingReplicas()}
		for _, r := range p.Replicas {
			if !down[r] {
				continue
			}
			if pi.Offline != nil { // more than one: its own array
				pi.Offline = append(slices.Clip(pi.Offline), r)
				continue
			}
			if single[r] == nil {
				if single == nil {
					single = map[int32][]int32{}
				}
				single[r] = []int32{r}
			}
			pi.Offline = single[r]
		}
		ti.Partitions = append(ti.Partitions, pi)
	}
	return ti
}

func (k *Backend) Produce(ctx context.Context, topic string, partition int32, batches []byte, acks int16) (kafkaproto.ProduceResult, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return kafkaproto.ProduceResult{}, toKafka(err)
	}
	p, err := k.cfg.Broker.Partition(topic, partition)
	if err != nil {
		return kafkaproto.ProduceResult{}, toKafka(err)
	}
	res, err := p.Produce(ctx, batches, int(acks))
	if err != nil {
		return kafkaproto.ProduceResult{}, toKafka(err)
	}
	if !res.Duplicate {
		k.cfg.Metrics.Produced(topic, int(res.LastOffset-res.BaseOffset+1), len(batches))
	}
	return kafkaproto.ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStart}, nil
}

// AppendForAcks splits an acks=all produce so the listener can read a
// connection's next requests while this one waits for the in-sync replicas.
func (k *Backend) AppendForAcks(ctx context.Context, topic string, partition int32, batches []byte) (kafkaproto.ProduceResult, kafkaproto.AckWait, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return kafkaproto.ProduceResult{}, kafkaproto.AckWait{}, toKafka(err)
	}
	p, err := k.cfg.Broker.Partition(topic, partition)
	if err != nil {
		return kafkaproto.ProduceResult{}, kafkaproto.AckWait{}, toKafka(err)
	}
	res, wait, err := p.AppendForAcks(batches, nil)
	if err != nil {
		return kafkaproto.ProduceResult{}, kafkaproto.AckWait{}, toKafka(err)
	}
	if !res.Duplicate {
		k.cfg.Metrics.Produced(topic, int(res.LastOffset-res.BaseOffset+1), len(batches))
	}
	return kafkaproto.ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStart},
		kafkaproto.AckWait{On: replicaWaiter{p}, Offset: wait.Offset, Epoch: wait.Epoch}, nil
}

// replicaWaiter is a partition's wait for its in-sync replicas with the
// broker's errors in Kafka's terms. One pointer: an AckWait holds it
// without an allocation.
type replicaWaiter struct{ p *broker.Partition }

func (w replicaWaiter) WaitReplicated(ctx context.Context, offset int64, epoch int32) error {
	return toKafka(w.p.WaitReplicated(ctx, offset, epoch))
}

func (k *Backend) Fetch(ctx context.Context, req kafkaproto.FetchRequest) (kafkaproto.FetchResult, error) {
	if req.ReplicaID >= 0 {
		// A follower's fetch of an idle, never-written log leaves it
		// unopened (issue 19).
		base, ok, err := k.cfg.Broker.FollowerFetchUnopened(req.Topic, req.Partition, req.ReplicaID, req.Offset, req.CurrentLeaderEpoch)
		if ok {
			return kafkaproto.FetchResult{HighWatermark: base, LastStableOffset: base, LogStartOffset: base}, toKafka(err)
		}
	}
	p, err := k.cfg.Broker.Partition(req.Topic, req.Partition)
	if err != nil {
		return kafkaproto.FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}, toKafka(err)
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
			return kafkaproto.FetchResult{HighWatermark: hwm, LastStableOffset: hwm, LogStartOffset: p.LogStart()}, toKafka(err)
		}
	}
	if req.NoRecords {
		if res, ok := pendingOnly(p, req); ok {
			return res, nil
		}
	}
	if req.ReplicaID >= 0 {
		chunk, err = p.ReadReplica(req.Offset, req.MaxBytes)
	} else if req.ReadCommitted {
		var aborted []segments.AbortedTxn
		chunk, _, aborted, err = p.ReadCommitted(req.Offset, req.MaxBytes)
		abortedList = toKafkaAborted(aborted)
	} else {
		chunk, err = p.Read(req.Offset, req.MaxBytes)
	}
	hwm := p.HighWatermark()
	res := kafkaproto.FetchResult{HighWatermark: hwm, LastStableOffset: hwm, LogStartOffset: p.LogStart(),
		AbortedTransactions: abortedList}
	if lso, lerr := p.LSO(); lerr == nil {
		res.LastStableOffset = min(lso, hwm)
	}
	if err != nil {
		return res, toKafka(err)
	}
	if chunk != nil { // nil: read_committed at or past the LSO
		res.Records = chunk
		k.cfg.Metrics.Consumed(req.Topic, 0, chunk.Len())
	}
	return res, nil
}

func (k *Backend) Notify(topic string, partition int32) <-chan struct{} {
	p, err := k.cfg.Broker.Hosted(topic, partition) // a wait needs no open log
	if err != nil {
		return nil
	}
	return p.Changed()
}

// Watch attaches a fetch session's watch to a hosted partition, its log
// opened or not (kafkaproto.PartitionWatcher).
func (k *Backend) Watch(topic string, partition int32, w *kafkaproto.Watch) error {
	p, err := k.cfg.Broker.Hosted(topic, partition)
	if err != nil {
		return toKafka(err)
	}
	p.Watch(w)
	return nil
}

func (k *Backend) ListOffset(ctx context.Context, topic string, partition int32, timestamp int64, currentLeaderEpoch int32, readCommitted bool) (int64, int64, int32, error) {
	p, err := k.cfg.Broker.Partition(topic, partition)
	if err != nil {
		return -1, -1, -1, toKafka(err)
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, -1, err
	}
	epoch := p.LeaderEpoch()
	switch timestamp {
	case -2:
		return p.LogStart(), -1, epoch, nil
	case -1:
		if readCommitted {
			lso, err := p.LSO()
			return lso, -1, epoch, toKafka(err)
		}
		return p.HighWatermark(), -1, epoch, nil
	case -3:
		off, ts, err := p.MaxTimestamp()
		return off, ts, epoch, toKafka(err)
	}
	off, ts, ok, err := p.OffsetForTimestamp(timestamp)
	if err != nil {
		return -1, -1, -1, toKafka(err)
	}
	limit := p.HighWatermark()
	if readCommitted {
		if limit, err = p.LSO(); err != nil {
			return -1, -1, -1, toKafka(err)
		}
	}
	if !ok || off >= limit {
		return -1, -1, -1, nil
	}
	return off, ts, epoch, nil
}

func (k *Backend) EndOffsetForEpoch(ctx context.Context, topic string, partition int32, currentLeaderEpoch, leaderEpoch int32) (int32, int64, error) {
	p, err := k.cfg.Broker.Partition(topic, partition)
	if err != nil {
		return -1, -1, toKafka(err)
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	epoch, end, err := p.EndOffsetForEpoch(leaderEpoch)
	if err != nil {
		return -1, -1, toKafka(err)
	}
	return epoch, end, nil
}

func (k *Backend) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if err := admin.RefuseInternal(topic, "delete records of"); err != nil {
		return -1, toKafka(err)
	}
	p, err := k.cfg.Broker.Partition(topic, partition)
	if err != nil {
		return -1, toKafka(err)
	}
	hwm := p.HighWatermark()
	if offset == -1 {
		offset = hwm
	}
	if offset < 0 || offset > hwm {
		return -1, fmt.Errorf("%w: %d above the high watermark %d", kafkaproto.ErrOffsetOutOfRange, offset, hwm)
	}
	start, err := p.DeleteRecordsBefore(offset)
	if err != nil {
		return -1, toKafka(err)
	}
	return start, nil
}

func (k *Backend) CreateTopic(ctx context.Context, spec kafkaproto.TopicSpec, validateOnly bool) error {
	if err := admin.RefuseInternal(spec.Name, "create"); err != nil {
		return toKafka(err)
	}
	_, err := k.cfg.Admin.CreateTopic(ctx, admin.TopicSpec{Name: spec.Name, Partitions: spec.Partitions,
		ReplicationFactor: spec.ReplicationFactor, Configs: spec.Configs, Assignments: spec.Assignments}, validateOnly)
	return toKafka(err)
}

func (k *Backend) DeleteTopic(ctx context.Context, name string) error {
	if err := admin.RefuseInternal(name, "delete"); err != nil {
		return toKafka(err)
	}
	return toKafka(k.cfg.Admin.DeleteTopic(ctx, name))
}

func (k *Backend) CreatePartitions(ctx context.Context, topic string, count int32, validateOnly bool) error {
	if err := admin.RefuseInternal(topic, "add partitions to"); err != nil {
		return toKafka(err)
	}
	return toKafka(k.cfg.Admin.CreatePartitions(ctx, topic, count, validateOnly))
}

func (k *Backend) DescribeConfigs(ctx context.Context, res kafkaproto.ConfigResource) ([]kafkaproto.ConfigEntry, error) {
	if res.Type == kafkaproto.ResourceBrokerLogger {
		if err := k.checkBrokerResource(res.Name); err != nil {
			return nil, err
		}
		return k.brokerLoggers(), nil
	}
	if res.Type == kafkaproto.ResourceBroker {
		if res.Name == "" { // cluster-wide dynamic defaults: runnel has none
			return nil, nil
		}
		if err := k.checkBrokerResource(res.Name); err != nil {
			return nil, err
		}
		return k.brokerConfigs(), nil
	}
	_, t, ok := k.cfg.Admin.LookupTopic(ctx, res.Name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", kafkaproto.ErrUnknownTopicOrPartition, res.Name)
	}
	var out []kafkaproto.ConfigEntry
	for _, def := range topicconfig.Defs() {
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
		e.Synonyms = topicconfig.Synonyms(def, t.Configs)
		out = append(out, e)
	}
	return out, nil
}

func (k *Backend) AlterConfigs(ctx context.Context, res kafkaproto.ConfigResource, ops []kafkaproto.ConfigOp, validateOnly bool) error {
	if res.Type == kafkaproto.ResourceBrokerLogger {
		if err := k.checkBrokerResource(res.Name); err != nil {
			return err
		}
		return k.alterBrokerLoggers(ops, validateOnly)
	}
	if res.Type == kafkaproto.ResourceBroker {
		if res.Name == "" {
			return fmt.Errorf("%w: cluster-wide broker configs are not supported; name the broker", kafkaproto.ErrInvalidRequest)
		}
		if err := k.checkBrokerResource(res.Name); err != nil {
			return err
		}
		return k.alterBrokerConfigs(ops, validateOnly)
	}
	if err := admin.RefuseInternal(res.Name, "reconfigure"); err != nil {
		return toKafka(err)
	}
	changes, listOps, err := k.topicConfigChanges(ctx, res.Name, ops, validateOnly)
	if err != nil {
		return err
	}
	_, err = k.cfg.Admin.AlterTopicConfigs(ctx, res.Name, changes, listOps, validateOnly)
	return toKafka(err)
}

// checkBrokerResource: a broker config resource must name this broker,
// as in Kafka, where each broker answers for its own configs.
func (k *Backend) checkBrokerResource(name string) error {
	if name != strconv.Itoa(int(k.cfg.NodeID)) {
		return fmt.Errorf("%w: unexpected broker id %q, this is broker %d", kafkaproto.ErrInvalidRequest, name, k.cfg.NodeID)
	}
	return nil
}

func (k *Backend) InitProducerID(ctx context.Context, transactionalID *string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	if transactionalID != nil {
		return k.initTransactionalProducer(ctx, *transactionalID, timeout, pid, epoch)
	}
	// A non-transactional producer always gets a new id at epoch 0, as
	// Kafka's transaction coordinator answers it, whatever id and epoch it
	// names (KIP-360's bump is for transactional ids): bumping the epoch of
	// the id a request names would let any client fence any producer.
	id, err := k.cfg.Admin.AllocateProducerID(ctx)
	if err != nil {
		return -1, -1, toKafka(err)
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

// CatchUpMetadata implements kafkaproto.MetadataCatchUp.
func (k *Backend) CatchUpMetadata(ctx context.Context) bool {
	return broker.CatchUpOnMiss(ctx, k.cfg.Meta)
}

// WriteTxnMarker serves WriteTxnMarkers (API 27) from the inter-broker
// port: a marker from the transaction coordinator of another broker
// (__consumer_offsets partitions complete the offsets staged by
// TxnOffsetCommit, others get a control batch).
func (k *Backend) WriteTxnMarker(ctx context.Context, topic string, partition int32, m kafkaproto.TxnMarker) error {
	return toKafka(k.cfg.Txn.WriteMarker(ctx, txn.Marker{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch,
		Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, kafkaproto.TopicPartition{Topic: topic, Partition: partition}))
}

// pendingOnly answers a NoRecords fetch without reading the log (issue
// 19): the partition's offsets, and that records wait at req.Offset. ok is
// false when none do there (or the offset is out of range): the read then
// answers as it would, which costs nothing or tells the error.
func pendingOnly(p *broker.Partition, req kafkaproto.FetchRequest) (kafkaproto.FetchResult, bool) {
	start, hwm := p.LogStart(), p.HighWatermark()
	res := kafkaproto.FetchResult{HighWatermark: hwm, LastStableOffset: hwm, LogStartOffset: start, Pending: true}
	if lso, err := p.LSO(); err == nil {
		res.LastStableOffset = min(lso, hwm)
	}
	readable := hwm // what a consumer reads up to
	switch {
	case req.ReplicaID >= 0:
		readable = p.LogEnd()
	case req.ReadCommitted:
		readable = res.LastStableOffset
	}
	return res, start <= req.Offset && req.Offset < readable
}

// toKafkaAborted is the aborted transactions of a read_committed read as
// Fetch returns them.
func toKafkaAborted(in []segments.AbortedTxn) []kafkaproto.AbortedTransaction {
	out := make([]kafkaproto.AbortedTransaction, len(in))
	for i, a := range in {
		out[i] = kafkaproto.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}
