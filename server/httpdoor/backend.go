package httpdoor

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/producers"
	"github.com/runnel/runnel/server/broker/topicconfig"
	"github.com/runnel/runnel/server/metrics"

	"github.com/runnel/runnel/recordbatch"
)

// acksAllTimeout bounds how long an HTTP produce with acks=all waits for the
// in-sync replicas (Kafka's request.timeout.ms default).
const acksAllTimeout = 30 * time.Second

var (
	_ api.Backend                 = (*Door)(nil)
	_ api.ControllersBackend      = (*Door)(nil)
	_ api.SeriesBackend           = (*Door)(nil)
	_ api.KafkaAPIVersionsBackend = (*Door)(nil)
	_ api.StorageBackend          = (*Door)(nil)

	_ api.IdempotentProduceBackend = (*Door)(nil)
)

// httpErrors is the one table from server errors to the api's sentinels.
var httpErrors = []struct{ from, to error }{
	{broker.ErrUnknownTopic, api.ErrUnknownTopic},
	{raftfsm.ErrUnknownTopic, api.ErrUnknownTopic},
	{broker.ErrUnknownPartition, api.ErrUnknownPartition},
	{raftfsm.ErrTopicExists, api.ErrTopicExists},
	{admin.ErrInvalidTopicName, api.ErrInvalidTopicName},
	{topicconfig.ErrInvalid, api.ErrInvalidConfig},
	{admin.ErrInvalidPartitions, api.ErrInvalidPartitions},
	{admin.ErrInvalidReplicas, api.ErrInvalidPartitions},
	{raftfsm.ErrInvalidConfig, api.ErrInvalidConfig},
	{raftfsm.ErrInvalidPartitions, api.ErrInvalidPartitions},
	{raftfsm.ErrNotEnoughBrokers, api.ErrInvalidPartitions},
	{admin.ErrInternalTopic, api.ErrInternalTopic},
	{raftfsm.ErrPolicyViolation, api.ErrPolicyViolation},
	{raftfsm.ErrQuorumChange, api.ErrQuorumChange},
	{raftfsm.ErrInvalidCommand, api.ErrInvalidRequest},
	{broker.ErrTooLarge, api.ErrTooLarge},
	{recordbatch.ErrInflatedTooLarge, api.ErrTooLarge},
	{recordbatch.ErrBatchTooLarge, api.ErrTooLarge},
	{recordbatch.ErrInvalidRecord, api.ErrInvalidRequest},
	{recordbatch.ErrCorruptBatch, api.ErrInvalidRequest},
	{broker.ErrOffsetOutOfRange, api.ErrOffsetOutOfRange},
	{broker.ErrNotLeader, api.ErrNotLeader},
	{broker.ErrNotEnoughReplicas, api.ErrNotEnoughReplicas},
	{raftfsm.ErrNotLeader, api.ErrNotController},
	{broker.ErrNotReady, api.ErrNotReady},
	{broker.ErrShuttingDown, api.ErrNotReady},
	{context.DeadlineExceeded, api.ErrTimeout},
	{broker.ErrStorage, api.ErrStorage},
	{segments.ErrStorage, api.ErrStorage},
	{broker.ErrIdempotencyKeyReused, api.ErrIdempotencyKeyReused},
}

// HTTPError translates err with the table (nil stays nil): the api's
// problem writer then answers with the sentinel's status and type.
func HTTPError(err error) error { return toHTTPError(err) }

func toHTTPError(err error) error {
	if err == nil {
		return nil
	}
	var cb *broker.CorruptBatchError
	if errors.As(err, &cb) {
		// A stored batch, not the request: the problem names it.
		return &api.CorruptBatchError{Topic: cb.Topic, Partition: cb.Partition, Offset: cb.Offset, NextOffset: cb.Next, Err: err}
	}
	for _, e := range httpErrors {
		if errors.Is(err, e.from) {
			return &translatedError{kind: e.to, err: err}
		}
	}
	return err
}

// translatedError carries a front door's sentinel (kind) beside the server's
// error, keeping the server's message as the problem detail.
type translatedError struct{ kind, err error }

func (e *translatedError) Error() string   { return e.err.Error() }
func (e *translatedError) Unwrap() []error { return []error{e.kind, e.err} }

// allowed is the one authorizer (server/access).
func (h *Door) allowed(principal, host, resourceType, name, op string) bool {
	return h.cfg.Access.Allowed(principal, host, resourceType, name, op)
}

func (h *Door) Ready() error {
	if !h.cfg.Ready() {
		return api.ErrNotReady
	}
	return nil
}

// StorageError implements api.StorageBackend: which partitions of this
// broker refuse writes since their disk failed, as the storage loop last saw.
func (h *Door) StorageError() error {
	if h.cfg.Storage == nil {
		return nil
	}
	return toHTTPError(h.cfg.Storage.Err())
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (h *Door) Cluster(ctx context.Context) (api.Cluster, error) {
	img, _ := h.cfg.Meta.Image()
	st := h.cfg.Meta.Status()
	out := api.Cluster{ClusterID: img.ClusterID, LeaderID: st.LeaderID, Controllers: []api.Controller{}}
	for _, c := range h.cfg.Meta.ControllerStatuses(ctx) {
		out.Controllers = append(out.Controllers, api.Controller{ID: c.ID, Address: c.Address, Role: c.Role,
			Term: c.Term, LastIndex: c.LastIndex, CommitIndex: c.CommitIndex})
	}
	sort.Slice(out.Controllers, func(i, j int) bool { return out.Controllers[i].ID < out.Controllers[j].ID })
	brokers, err := h.Brokers(ctx)
	out.Brokers = brokers
	out.UnderReplicated, out.Offline = metrics.PartitionHealth(img)
	build := h.cfg.Build
	out.Node = &api.NodeSelf{ID: h.cfg.NodeID, MetadataOffset: int64(img.Index), MetadataDigest: img.Digest(),
		Build: &build, StorageError: errText(h.StorageError())}
	out.Node.Roles = append(out.Node.Roles, h.cfg.Roles...) // null when none, as before
	return out, err
}

func (h *Door) AddController(ctx context.Context, c api.ControllerChange) (api.Cluster, error) {
	if err := h.cfg.Meta.AddVoter(ctx, raftfsm.Server{ID: c.ID, Address: c.Address}); err != nil {
		return api.Cluster{}, toHTTPError(fmt.Errorf("add controller %d: %w", c.ID, err))
	}
	return h.Cluster(ctx)
}

func (h *Door) RemoveController(ctx context.Context, id int32) (api.Cluster, error) {
	if err := h.cfg.Meta.RemoveVoter(ctx, id); err != nil {
		return api.Cluster{}, toHTTPError(fmt.Errorf("remove controller %d: %w", id, err))
	}
	return h.Cluster(ctx)
}

func (h *Door) Brokers(ctx context.Context) ([]api.Broker, error) {
	img, _ := h.cfg.Meta.Image()
	replicas, leaders := map[int32]int32{}, map[int32]int32{}
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				replicas[r]++
			}
			if p.Leader >= 0 {
				leaders[p.Leader]++
			}
		}
	}
	// Other brokers' applied metadata offsets come from their heartbeats,
	// which the active controller keeps; without one, only ours is known.
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	live, _ := h.cfg.Meta.BrokerLiveness(lctx)
	cancel()
	out := make([]api.Broker, 0, len(img.Brokers))
	for _, b := range img.Brokers {
		ab := api.Broker{ID: b.ID, State: string(b.State), Rack: b.Rack, Epoch: b.Epoch,
			HTTPAddress: b.HTTPAddr, KafkaAddress: b.KafkaAddr,
			Partitions: replicas[b.ID], Leaders: leaders[b.ID]}
		if l, ok := live[b.ID]; ok {
			ab.MetadataOffset = int64(l.AppliedIndex)
			ab.StorageError = l.StorageError // from its last heartbeat
		}
		if b.ID == h.cfg.NodeID {
			ab.MetadataOffset = int64(img.Index)
			ab.StorageError = errText(h.StorageError())
		}
		out = append(out, ab)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (h *Door) ListTopics(ctx context.Context, q api.ListQuery) (api.TopicPage, error) {
	img, _ := h.cfg.Meta.Image()
	principal := api.PrincipalFrom(ctx)
	// The image keeps topics in name order: the page starts at the prefix
	// or the cursor and stops one name past the limit (to tell that more
	// follow), without visiting the other topics.
	start := max(q.Prefix, q.After)
	names := make([]string, 0, q.Limit+1)
	for name := range img.Topics.From(start) {
		if !strings.HasPrefix(name, q.Prefix) || len(names) > q.Limit {
			break
		}
		if q.Match(name) && h.allowed(principal, "*", "topic", name, "describe") { // as Kafka's Metadata: only the topics the principal may describe
			names = append(names, name)
		}
	}
	names, more := api.PageNames(names, q)
	out := api.TopicPage{Topics: make([]api.TopicSummary, 0, len(names)), More: more}
	for _, name := range names {
		t := img.Topics.Get(name)
		out.Topics = append(out.Topics, api.TopicSummary{Name: t.Name, Partitions: int32(len(t.Partitions)),
			ReplicationFactor: admin.ReplicationFactor(t), Internal: admin.IsInternal(t.Name),
			SizeBytes: h.cfg.Broker().TopicSizeBytes(t.Name)}) // makes no partition, opens no log
	}
	return out, nil
}

func (h *Door) CreateTopic(ctx context.Context, req api.CreateTopicRequest) (api.TopicDetail, error) {
	if err := admin.RefuseInternal(req.Name, "create"); err != nil {
		return api.TopicDetail{}, toHTTPError(err)
	}
	t, err := h.cfg.Admin.CreateTopic(ctx, admin.TopicSpec{Name: req.Name, Partitions: req.Partitions,
		ReplicationFactor: req.ReplicationFactor, Configs: req.Configs}, false)
	if err != nil {
		return api.TopicDetail{}, toHTTPError(err)
	}
	return h.detail(t), nil
}

func (h *Door) DescribeTopic(ctx context.Context, name string) (api.TopicDetail, error) {
	_, t, ok := h.cfg.Admin.LookupTopic(ctx, name)
	if !ok {
		return api.TopicDetail{}, fmt.Errorf("%w: %s", api.ErrUnknownTopic, name)
	}
	return h.detail(t), nil
}

func (h *Door) detail(t *raftfsm.Topic) api.TopicDetail {
	d := api.TopicDetail{Name: t.Name, ID: uuidString(t.ID), ReplicationFactor: admin.ReplicationFactor(t),
		Internal: admin.IsInternal(t.Name), Configs: map[string]string{}}
	for k, v := range t.Configs {
		d.Configs[k] = v
	}
	hosted := map[int32]*broker.Partition{}
	for _, p := range h.cfg.Broker().PartitionsOf(t.Name) {
		hosted[p.Index()] = p
	}
	for i, pm := range t.Partitions {
		pd := api.PartitionDetail{Partition: int32(i), Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
			Replicas: nonNil(pm.Replicas), ISR: nonNil(pm.ISR)}
		pd.AddingReplicas, pd.RemovingReplicas = pm.AddingReplicas(), pm.RemovingReplicas()
		if p, ok := hosted[int32(i)]; ok {
			// An empty log not opened yet is not opened for this.
			if start, end, hwm, err := p.Offsets(); err == nil {
				pd.StartOffset, pd.EndOffset, pd.HighWatermark = start, end, hwm
			}
			pd.SizeBytes = p.SizeBytes()
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func uuidString(id [16]byte) string {
	h := hex.EncodeToString(id[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (h *Door) DeleteTopic(ctx context.Context, name string) error {
	if err := admin.RefuseInternal(name, "delete"); err != nil {
		return toHTTPError(err)
	}
	return toHTTPError(h.cfg.Admin.DeleteTopic(ctx, name))
}

func (h *Door) AlterTopicConfigs(ctx context.Context, name string, set map[string]*string) (api.TopicDetail, error) {
	if err := admin.RefuseInternal(name, "reconfigure"); err != nil {
		return api.TopicDetail{}, toHTTPError(err)
	}
	t, err := h.cfg.Admin.AlterTopicConfigs(ctx, name, set, nil, false)
	if err != nil {
		return api.TopicDetail{}, toHTTPError(err)
	}
	return h.detail(t), nil
}

// Produce groups records by partition, encodes one batch per partition and
// checks every batch before appending any. A request another node forwarded
// may carry an idempotency key (producers.ForwardedKey).
func (h *Door) Produce(ctx context.Context, topic string, records []api.ProduceRecord, acks int) ([]api.RecordOffset, error) {
	return h.produce(ctx, topic, records, acks, producers.ForwardedKey(ctx))
}

// ProduceIdempotent implements api.IdempotentProduceBackend (server/broker/producers/keys.go).
func (h *Door) ProduceIdempotent(ctx context.Context, topic string, records []api.ProduceRecord, acks int, key api.IdempotencyKey) ([]api.RecordOffset, error) {
	k := producers.NewKey(key.Principal, key.Key, key.Digest)
	return h.produce(ctx, topic, records, acks, &k)
}

// produce is Produce; with k every partition's batch carries the key, and a
// partition that already holds the key's batch answers with its offsets.
func (h *Door) produce(ctx context.Context, topic string, records []api.ProduceRecord, acks int, k *producers.Key) ([]api.RecordOffset, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return nil, toHTTPError(err)
	}
	img, t, ok := h.cfg.Admin.LookupTopic(ctx, topic)
	if !ok {
		return nil, fmt.Errorf("%w: %s", api.ErrUnknownTopic, topic)
	}
	n := int32(len(t.Partitions))
	if acks == api.AcksAll {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, acksAllTimeout)
			defer cancel()
		}
	}
	sticky := int32(h.sticky.Add(1) % uint32(n))
	if k != nil {
		// A retry must place every record where the first try did.
		sticky = int32(uint64(k.ID) % uint64(n))
	}
	now := h.cfg.Now().UnixMilli() // the records' CreateTime
	byPart := map[int32][]recordbatch.NewRecord{}
	where := make([]api.RecordOffset, len(records))
	for i, r := range records {
		var part int32
		switch {
		case r.Partition != nil:
			part = *r.Partition
			if part < 0 || part >= n {
				return nil, fmt.Errorf("%w: records[%d]: %s has partitions 0..%d, not %d", api.ErrUnknownPartition, i, topic, n-1, part)
			}
		case r.Key != nil:
			part = keyPartition(r.Key, n)
		default:
			part = sticky
		}
		nr := recordbatch.NewRecord{Key: r.Key, Value: r.Value, Timestamp: now}
		if r.Timestamp != nil {
			nr.Timestamp = r.Timestamp.UnixMilli()
		}
		for _, hd := range r.Headers {
			nr.Headers = append(nr.Headers, kmsg.Header{Key: hd.Key, Value: hd.Value})
		}
		where[i] = api.RecordOffset{Partition: part, Offset: int64(len(byPart[part]))}
		byPart[part] = append(byPart[part], nr)
	}
	batches := map[int32][]byte{}
	parts := map[int32]*broker.Partition{}
	remote := map[int32]string{} // partition -> leader's HTTP address
	maxMessage := int(topicconfig.Int(t.Configs, "max.message.bytes"))
	for part, recs := range byPart {
		batch := recordbatch.Build(recs)
		if k != nil {
			broker.StampKey(batch, *k)
		}
		if len(batch) > maxMessage {
			return nil, fmt.Errorf("%w: partition %d batch of %d bytes, max.message.bytes is %d", api.ErrTooLarge, part, len(batch), maxMessage)
		}
		p, addr, err := h.route(ctx, img, t, part)
		if err != nil {
			return nil, err
		}
		if p == nil {
			remote[part] = addr
			continue
		}
		batches[part], parts[part] = batch, p
	}
	if err := broker.PeekKeys(parts, byPart, k); err != nil {
		return nil, toHTTPError(err)
	}
	bases := map[int32]int64{}
	for part, batch := range batches {
		res, err := parts[part].ProduceKeyed(ctx, batch, acks, k)
		if err != nil {
			return nil, toHTTPError(err)
		}
		bases[part] = res.BaseOffset
		if res.Duplicate {
			h.cfg.Metrics.IdempotentReplay(topic)
		} else {
			h.cfg.Metrics.Produced(topic, len(byPart[part]), len(batch))
		}
	}
	for part, addr := range remote {
		base, err := h.forward.produce(ctx, addr, topic, part, byPart[part], acks, k)
		if err != nil {
			return nil, err
		}
		bases[part] = base
	}
	for i := range where {
		if acks == api.AcksNone {
			where[i].Offset = -1
			continue
		}
		where[i].Offset += bases[where[i].Partition]
	}
	return where, nil
}

// route finds where a partition is served: the local partition when this
// broker leads it, else the leader's node host for the forwarder.
func (h *Door) route(ctx context.Context, img *raftfsm.Image, t *raftfsm.Topic, part int32) (*broker.Partition, string, error) {
	leader := t.Partitions[part].Leader
	if b := h.cfg.Broker(); leader == h.cfg.NodeID && b != nil {
		p, err := b.Partition(t.Name, part)
		return p, "", toHTTPError(err)
	}
	if _, ok := img.Brokers[leader]; leader < 0 || !ok {
		return nil, "", fmt.Errorf("%w: %s-%d has no leader", api.ErrNotLeader, t.Name, part)
	}
	if IsForwarded(ctx) {
		return nil, "", fmt.Errorf("%w: %s-%d is led by broker %d", api.ErrNotLeader, t.Name, part, leader)
	}
	return nil, NodeHost(leader), nil
}

// topicPartition looks topic up (catching up with the controller when this
// node does not know it yet) and checks that partition is one of its.
func (h *Door) topicPartition(ctx context.Context, topic string, partition int32) (*raftfsm.Image, *raftfsm.Topic, error) {
	img, t, ok := h.cfg.Admin.LookupTopic(ctx, topic)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s", api.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: %s has partitions 0..%d, not %d", api.ErrUnknownPartition, topic, len(t.Partitions)-1, partition)
	}
	return img, t, nil
}

// consumeRoute is where a consume is served: "" here, or the node host of
// the partition's leader.
func (h *Door) consumeRoute(ctx context.Context, req api.ConsumeRequest) (string, error) {
	img, t, err := h.topicPartition(ctx, req.Topic, req.Partition)
	if err != nil {
		return "", err
	}
	_, addr, err := h.route(ctx, img, t, req.Partition)
	return addr, err
}

func (h *Door) Consume(ctx context.Context, req api.ConsumeRequest) (api.ConsumeResult, error) {
	if addr, err := h.consumeRoute(ctx, req); err != nil {
		return api.ConsumeResult{}, err
	} else if addr != "" {
		return h.forward.Consume(ctx, addr, req)
	}
	res, err := h.cfg.Broker().ReadRecords(ctx, broker.ReadRequest{Topic: req.Topic, Partition: req.Partition,
		Offset: req.Offset, Timestamp: req.Timestamp, MaxRecords: req.MaxRecords, MaxBytes: req.MaxBytes, Wait: req.Wait,
		ReadUncommitted: req.ReadUncommitted, Markers: req.IncludeControl})
	if err != nil && !(errors.Is(err, context.Canceled) && len(res.Records) > 0) {
		return api.ConsumeResult{}, toHTTPError(err)
	}
	out := api.ConsumeResult{NextOffset: res.Next, HighWatermark: res.HWM, StartOffset: res.LogStart,
		Records: make([]api.ConsumedRecord, 0, len(res.Records))}
	bytes := 0
	for _, r := range res.Records {
		cr := api.ConsumedRecord{Partition: req.Partition, Offset: r.Offset,
			Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value, Transactional: r.Transactional,
			Control: apiMarker(r.Control)}
		for _, hd := range r.Headers {
			cr.Headers = append(cr.Headers, api.Header{Key: hd.Key, Value: hd.Value})
		}
		bytes += len(r.Key) + len(r.Value)
		out.Records = append(out.Records, cr)
	}
	h.cfg.Metrics.Consumed(req.Topic, len(out.Records), bytes)
	return out, nil
}

var _ api.ConsumeStreamer = (*Door)(nil)

// ConsumeEach is Consume handing the records to each straight from the
// decoded batches (see api.ConsumeStreamer): no slice of records and no
// copies of keys and values per response. Forwarded reads come back
// whole from the leader and are handed over one by one.
func (h *Door) ConsumeEach(ctx context.Context, req api.ConsumeRequest, each func(*api.ConsumedRecord) error) (api.ConsumeResult, error) {
	if addr, err := h.consumeRoute(ctx, req); err != nil {
		return api.ConsumeResult{}, err
	} else if addr != "" {
		res, err := h.forward.Consume(ctx, addr, req)
		if err != nil {
			return res, err
		}
		for i := range res.Records {
			if err := each(&res.Records[i]); err != nil {
				return api.ConsumeResult{}, err
			}
		}
		res.Records = nil
		return res, nil
	}
	var cr api.ConsumedRecord // reused: each sees one record at a time
	bytes := 0
	var marker api.ControlMarker // reused, as cr
	emit := func(r *recordbatch.Record, transactional bool, m *recordbatch.Marker) error {
		cr = api.ConsumedRecord{Partition: req.Partition, Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp),
			Key: r.Key, Value: r.Value, Headers: cr.Headers[:0], Transactional: transactional}
		if m != nil {
			marker = *apiMarker(m)
			cr.Control = &marker
		}
		for _, hd := range r.Headers {
			cr.Headers = append(cr.Headers, api.Header{Key: hd.Key, Value: hd.Value})
		}
		bytes += len(r.Key) + len(r.Value)
		return each(&cr)
	}
	res, err := h.cfg.Broker().ReadRecords(ctx, broker.ReadRequest{Topic: req.Topic, Partition: req.Partition,
		Offset: req.Offset, Timestamp: req.Timestamp, MaxRecords: req.MaxRecords, MaxBytes: req.MaxBytes, Wait: req.Wait,
		ReadUncommitted: req.ReadUncommitted, Markers: req.IncludeControl, Each: emit})
	h.cfg.Metrics.Consumed(req.Topic, res.Count, bytes)
	if err != nil && !(errors.Is(err, context.Canceled) && res.Count > 0) {
		return api.ConsumeResult{}, toHTTPError(err)
	}
	return api.ConsumeResult{NextOffset: res.Next, HighWatermark: res.HWM, StartOffset: res.LogStart}, nil
}

// apiMarker is a transaction marker as HTTP readers see it (nil: none).
func apiMarker(m *recordbatch.Marker) *api.ControlMarker {
	if m == nil {
		return nil
	}
	typ := api.ControlAbort
	if m.Type == recordbatch.ControlCommit {
		typ = api.ControlCommit
	}
	return &api.ControlMarker{Type: typ, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch}
}

func (h *Door) Series(ctx context.Context) (api.Series, error) {
	return h.cfg.Metrics.Series(), nil
}

// KafkaAPIVersions lists what the Kafka listener implements; a node without
// the listener answers 501.
func (h *Door) KafkaAPIVersions(ctx context.Context) ([]api.KafkaAPIVersion, error) {
	if !h.cfg.KafkaListener() {
		return nil, fmt.Errorf("%w: this node runs no Kafka listener", api.ErrNotImplemented)
	}
	var out []api.KafkaAPIVersion
	for _, v := range kafkaproto.SupportedVersions() {
		out = append(out, api.KafkaAPIVersion{APIKey: v.Key, Name: v.Name, MinVersion: v.MinVersion, MaxVersion: v.MaxVersion})
	}
	return out, nil
}

func (h *Door) ElectPreferredLeaders(ctx context.Context, topic string) (api.TopicDetail, error) {
	if _, err := h.cfg.Admin.ElectLeaders(ctx, topic); err != nil {
		return api.TopicDetail{}, toHTTPError(err)
	}
	return h.DescribeTopic(ctx, topic)
}

var _ api.ReassignBackend = (*Door)(nil)

func (h *Door) ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (api.TopicDetail, error) {
	if err := h.cfg.Admin.StartReassignment(ctx, topic, partition, replicas); err != nil {
		return api.TopicDetail{}, reassignHTTPError(err)
	}
	return h.DescribeTopic(ctx, topic)
}

func (h *Door) CancelReassignment(ctx context.Context, topic string, partition int32) (api.TopicDetail, error) {
	if err := h.cfg.Admin.CancelReassignment(ctx, topic, partition); err != nil {
		return api.TopicDetail{}, reassignHTTPError(err)
	}
	return h.DescribeTopic(ctx, topic)
}

// reassignHTTPError adds the reassignment errors to httpErrors.
func reassignHTTPError(err error) error {
	switch {
	case errors.Is(err, raftfsm.ErrUnknownPartition):
		return &translatedError{kind: api.ErrUnknownPartition, err: err}
	case errors.Is(err, raftfsm.ErrInvalidAssignment), errors.Is(err, raftfsm.ErrUnknownBroker):
		return &translatedError{kind: api.ErrInvalidRequest, err: err}
	case errors.Is(err, raftfsm.ErrNoReassignment):
		return &translatedError{kind: api.ErrConflict, err: err}
	}
	return toHTTPError(err)
}
