package kapi

import (
	"context"
	"io"
	"sort"
	"time"
)

// Broker is everything the Kafka listener needs from the server. It is the
// union of three small interfaces so that each handler depends only on the
// part it uses. Later features (consumer groups, transactions, SASL) are
// added as separate optional interfaces that the listener detects with a
// type assertion on the Broker value; this interface does not widen.
//
// All methods of all three interfaces are safe for concurrent use by many
// connections at once. Errors returned by any method are matched with
// errors.Is against the sentinel errors in errors.go and sent as the
// corresponding Kafka error code; an error that matches none of them is sent
// as UNKNOWN_SERVER_ERROR. Methods taking a context return promptly (with
// ctx.Err() or a wrapped ErrRequestTimedOut) when it is done.
type Broker interface {
	MetadataSource
	Partitions
	Admin
}

// MetadataSource gives the listener the cluster metadata as this broker
// currently knows it.
type MetadataSource interface {
	// Cluster returns the current metadata snapshot and a channel that is
	// closed once a newer snapshot is available. The snapshot is immutable:
	// neither side modifies it after it has been returned. Cheap: the
	// listener calls it for every request that needs metadata.
	Cluster() (*Cluster, <-chan struct{})
}

// Cluster is an immutable snapshot of cluster metadata.
type Cluster struct {
	ClusterID    string
	ControllerID int32 // -1 when no controller is known
	Self         int32 // node id of the broker this listener belongs to
	// Brokers are the brokers clients may connect to (registered and not
	// fenced), sorted by ID, with their advertised Kafka listener address.
	Brokers []BrokerInfo
	// Topics are sorted by Name; see Topic for lookups.
	Topics []TopicInfo
	// byID indexes Topics by id once IndexTopicIDs ran; nil: TopicByID scans.
	byID map[[16]byte]int
}

// IndexTopicIDs builds the index TopicByID uses (Fetch v13+ names every
// topic by id). Call it once, before the Cluster is shared.
func (c *Cluster) IndexTopicIDs() {
	c.byID = make(map[[16]byte]int, len(c.Topics))
	for i := range c.Topics {
		c.byID[c.Topics[i].ID] = i
	}
}

// BrokerInfo is one broker's advertised Kafka endpoints: Host/Port for the
// plaintext listener and SSLHost/SSLPort for the TLS one (a port of 0: the
// broker has no such listener). A client is always given the endpoints of
// the listener it connected to, as Kafka does with named listeners.
type BrokerInfo struct {
	ID      int32
	Host    string
	Port    int32
	SSLHost string
	SSLPort int32
	Rack    string // empty: no rack
}

// TopicInfo is one topic's metadata.
type TopicInfo struct {
	Name     string
	ID       [16]byte // topic id (UUID bytes)
	Internal bool     // e.g. __consumer_offsets
	// Partitions are indexed by partition number: Partitions[i].Partition == i.
	Partitions []PartitionInfo
}

// PartitionInfo is one partition's placement.
type PartitionInfo struct {
	Partition   int32
	Leader      int32 // -1 when the partition has no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32 // replicas on brokers that are fenced or down
	// Adding and Removing are set while a reassignment runs: the replicas
	// it adds to and removes from Replicas (which holds both).
	Adding, Removing []int32
}

// Topic returns the topic called name, using binary search on the sorted
// Topics slice.
func (c *Cluster) Topic(name string) (*TopicInfo, bool) {
	i := sort.Search(len(c.Topics), func(i int) bool { return c.Topics[i].Name >= name })
	if i < len(c.Topics) && c.Topics[i].Name == name {
		return &c.Topics[i], true
	}
	return nil, false
}

// TopicByID returns the topic whose id is id (indexed, or a linear scan
// without IndexTopicIDs).
func (c *Cluster) TopicByID(id [16]byte) (*TopicInfo, bool) {
	if c.byID != nil {
		i, ok := c.byID[id]
		if !ok {
			return nil, false
		}
		return &c.Topics[i], true
	}
	for i := range c.Topics {
		if c.Topics[i].ID == id {
			return &c.Topics[i], true
		}
	}
	return nil, false
}

// Broker returns the broker with the given id.
func (c *Cluster) Broker(id int32) (*BrokerInfo, bool) {
	i := sort.Search(len(c.Brokers), func(i int) bool { return c.Brokers[i].ID >= id })
	if i < len(c.Brokers) && c.Brokers[i].ID == id {
		return &c.Brokers[i], true
	}
	return nil, false
}

// Partitions is the data path: partitions led by this broker. Every method
// returns ErrUnknownTopicOrPartition for a partition that does not exist and
// ErrNotLeader when this broker does not lead it.
type Partitions interface {
	// Produce appends raw RecordBatch v2 bytes exactly as received (one or
	// more concatenated batches, possibly compressed) to a partition.
	// The server validates them (sizes, CRC, magic, decompression),
	// assigns offsets and keeps idempotent-producer sequence state: a
	// duplicate of an already stored batch returns that batch's original
	// BaseOffset and no error; a sequence gap returns ErrOutOfOrderSequence;
	// a stale producer epoch ErrInvalidProducerEpoch. acks is 0, 1 or -1;
	// with -1 Produce waits until the batches are replicated to the ISR or
	// ctx's deadline (the request's timeout) passes (ErrRequestTimedOut).
	// batches aliases the connection's read buffer: it may be modified
	// in place (offsets, epochs) but must not be retained after Produce
	// returns; copy what is kept.
	Produce(ctx context.Context, topic string, partition int32, batches []byte, acks int16) (ProduceResult, error)

	// Fetch reads whole batches starting with the one holding req.Offset,
	// at most req.MaxBytes bytes but at least one batch when one exists
	// below the high watermark (or the last stable offset when
	// req.ReadCommitted), and never beyond it. An offset equal to the
	// high watermark yields an empty chunk; an offset outside
	// [log start, log end] is ErrOffsetOutOfRange (FetchResult still
	// carries the watermarks). Fetch never blocks waiting for data; see
	// Notify. The caller closes the returned Chunk (when non-nil).
	Fetch(ctx context.Context, req FetchRequest) (FetchResult, error)

	// Notify returns a channel that is closed the next time the
	// partition's high watermark advances, or its leadership or existence
	// changes, after the call. Callers take the channel before calling
	// Fetch, then wait on it, so that no advance is missed. Every caller
	// between two advances may receive the same channel. A nil channel
	// (never closed) is acceptable for an unknown partition.
	Notify(topic string, partition int32) <-chan struct{}

	// ListOffset answers ListOffsets for one partition. timestamp is -2
	// (earliest: log start offset), -1 (latest: the high watermark, or the
	// last stable offset when readCommitted), -3 (the offset and timestamp
	// of the record with the largest timestamp) or a timestamp in ms (the
	// first offset whose timestamp is >= it, with that timestamp; offset
	// and timestamp -1 when there is none). currentLeaderEpoch is -1 or the
	// client's leader epoch (ErrFencedLeaderEpoch / ErrUnknownLeaderEpoch
	// on mismatch). The returned leaderEpoch is the epoch of the found
	// offset or -1.
	ListOffset(ctx context.Context, topic string, partition int32, timestamp int64, currentLeaderEpoch int32, readCommitted bool) (offset, ts int64, leaderEpoch int32, err error)

	// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest leader
	// epoch <= leaderEpoch known to the partition and the offset where it
	// ended (the log end offset for the current epoch).
	// currentLeaderEpoch is checked as in ListOffset.
	EndOffsetForEpoch(ctx context.Context, topic string, partition int32, currentLeaderEpoch, leaderEpoch int32) (epoch int32, endOffset int64, err error)

	// DeleteRecords advances the partition's log start offset to offset
	// (-1: the high watermark) and returns the new low watermark. An
	// offset above the high watermark is ErrOffsetOutOfRange.
	DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (lowWatermark int64, err error)
}

// ProduceResult is what Produce stored.
type ProduceResult struct {
	BaseOffset     int64 // offset of the first record of the first batch
	LogAppendTime  int64 // -1 unless the topic uses message.timestamp.type=LogAppendTime
	LogStartOffset int64
}

// FetchRequest asks for records from one partition.
type FetchRequest struct {
	Topic              string
	Partition          int32
	Offset             int64
	MaxBytes           int   // > 0; a first batch larger than this is still returned whole
	CurrentLeaderEpoch int32 // -1: not checked
	ReadCommitted      bool  // read only up to the last stable offset
	// ReplicaID is -1 for a consumer; a broker id when a follower replica
	// fetches to replicate (Kafka's inter-broker Fetch): the read then goes
	// up to the log end, not the high watermark, and Offset tells the
	// leader how far the follower's log reaches.
	ReplicaID int32
	// NoRecords: the response has no room left for records (issue 19: a
	// follower's fetch of 100,000 partitions read every one after its 16
	// MiB were full, each read opening files, to drop what it read). The
	// broker may answer without reading them, with Pending telling
	// whether there are records at Offset; it checks and counts the fetch
	// as it does any other (a follower's position moves the high
	// watermark). A broker that reads them anyway is answered as before.
	NoRecords bool
}

// FetchResult is one partition's fetch answer.
type FetchResult struct {
	Records          Chunk // nil or empty when there is nothing to read
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// AbortedTransactions (ReadCommitted only; nil otherwise) are the
	// aborted transactions with records in the returned range, by first
	// offset: the client drops those producers' batches from each first
	// offset up to the producer's abort marker.
	AbortedTransactions []AbortedTransaction
	// Pending (a NoRecords fetch answered without reading): there are
	// records to read at the request's offset.
	Pending bool
}

// AbortedTransaction is one entry of a read_committed Fetch's
// aborted_transactions.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// Chunk is a byte range of whole record batches. It matches segments.Chunk,
// so the server can hand those through unchanged. A Chunk is used by one
// goroutine at a time.
type Chunk interface {
	// WriteTo writes exactly Len bytes to w; it uses sendfile when w is a
	// *net.TCPConn (or any io.ReaderFrom that accepts a file).
	io.WriterTo
	// Len is the number of bytes WriteTo writes.
	Len() int
	// Bytes reads the bytes into memory (for conversion or tests).
	Bytes() ([]byte, error)
	// Close releases the file or buffer the chunk pins. Idempotent.
	Close() error
}

// Admin is topic administration and producer id allocation. Methods that
// change metadata go through the controller; they return once the change is
// committed and visible in this broker's Cluster snapshot, or with
// ctx's error. validateOnly means check everything and change nothing.
type Admin interface {
	// CreateTopic creates one topic. Partitions or ReplicationFactor -1
	// mean the broker defaults. Errors: ErrTopicExists, ErrInvalidTopic,
	// ErrInvalidPartitions, ErrInvalidReplicationFactor, ErrInvalidConfig,
	// ErrPolicyViolation, ErrNotController.
	CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool) error

	// DeleteTopic deletes a topic and its data (ErrUnknownTopicOrPartition
	// when absent).
	DeleteTopic(ctx context.Context, name string) error

	// CreatePartitions raises a topic's partition count to count
	// (ErrInvalidPartitions when count is not larger than the current one).
	CreatePartitions(ctx context.Context, topic string, count int32, validateOnly bool) error

	// DescribeConfigs returns every config of a resource, explicit and
	// default, sorted by name. A broker resource names this broker (its
	// configs) or is "" (the cluster-wide dynamic defaults, maybe none).
	DescribeConfigs(ctx context.Context, res ConfigResource) ([]ConfigEntry, error)

	// AlterConfigs applies incremental config operations to a resource
	// atomically (all or none). Unknown config names, bad values and
	// configs that cannot change at run time are ErrInvalidConfig.
	AlterConfigs(ctx context.Context, res ConfigResource, ops []ConfigOp, validateOnly bool) error

	// InitProducerID allocates a producer id and epoch for an idempotent
	// producer. producerID/producerEpoch are -1/-1 for a new producer, or
	// the producer's current ones (KIP-360); for a non-transactional
	// producer the server may (runnel's does, as Kafka's) answer with a
	// new id at epoch 0 rather than bump the named one.
	// transactionalID is nil for a non-transactional producer; a server
	// without transactions returns ErrTransactionsUnsupported otherwise.
	InitProducerID(ctx context.Context, transactionalID *string, txnTimeout time.Duration, producerID int64, producerEpoch int16) (int64, int16, error)
}

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Name              string
	Partitions        int32 // -1: broker default
	ReplicationFactor int16 // -1: broker default
	Configs           map[string]string
	// Assignments, when set, are the replicas of each partition (the
	// first preferred leader); Partitions and ReplicationFactor then
	// match their shape. The Broker checks the brokers are alive.
	Assignments [][]int32
}

// ResourceType is a Kafka config resource type.
type ResourceType int8

// Config resource types, with Kafka's numeric values.
const (
	ResourceTopic  ResourceType = 2
	ResourceBroker ResourceType = 4
	// ResourceBrokerLogger names a broker (by id) whose loggers are its
	// configs: Kafka's way to change log levels at run time.
	ResourceBrokerLogger ResourceType = 8
)

// ConfigResource names a topic or a broker (by decimal id; "" = cluster default).
type ConfigResource struct {
	Type ResourceType
	Name string
}

// ConfigSource is where a config value comes from, with Kafka's numeric values.
type ConfigSource int8

// Config sources.
const (
	SourceTopic         ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	SourceDynamicBroker ConfigSource = 2 // DYNAMIC_BROKER_CONFIG
	SourceBrokerLogger  ConfigSource = 6 // DYNAMIC_BROKER_LOGGER_CONFIG
	SourceStaticBroker  ConfigSource = 4 // STATIC_BROKER_CONFIG: from the command line/file
	SourceDefault       ConfigSource = 5 // DEFAULT_CONFIG
)

// ConfigEntry is one config of a resource.
type ConfigEntry struct {
	Name      string
	Value     *string // nil for sensitive or unset values
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      int8   // Kafka ConfigType (1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, ...); 0 unknown
	Doc       string // optional documentation
	// Synonyms are where the value could come from, most specific first
	// (e.g. the topic's retention.ms, then the broker's log.retention.ms),
	// reported when a DescribeConfigs request asks for them.
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one source a config's value could come from.
type ConfigSynonym struct {
	Name   string
	Value  *string
	Source ConfigSource
}

// ConfigOpType is an IncrementalAlterConfigs operation, with Kafka's values.
type ConfigOpType int8

// Config operations.
const (
	OpSet      ConfigOpType = 0
	OpDelete   ConfigOpType = 1 // back to the default
	OpAppend   ConfigOpType = 2 // list configs only
	OpSubtract ConfigOpType = 3 // list configs only
)

// ConfigOp is one incremental config change.
type ConfigOp struct {
	Name  string
	Op    ConfigOpType
	Value *string
}

// TopicLookup is an optional extension of a Broker: one topic as its
// Cluster shows it, without building a Cluster. A node rebuilds its Cluster,
// which holds every topic, after each metadata change; CreateTopics
// describes each topic right after creating it, and through Cluster that
// cost work in the number of topics for every creation (issue 19).
// LookupTopic is safe for concurrent use.
type TopicLookup interface {
	LookupTopic(name string) (TopicInfo, bool)
}

// LookupTopic finds one topic through b's TopicLookup, else in its Cluster.
func LookupTopic(b Broker, name string) (TopicInfo, bool) {
	if l, ok := b.(TopicLookup); ok {
		return l.LookupTopic(name)
	}
	cl, _ := b.Cluster()
	if ti, ok := cl.Topic(name); ok {
		return *ti, true
	}
	return TopicInfo{}, false
}

// MetadataCatchUp is an optional extension of a Broker. A node's metadata
// can trail the cluster's by a few milliseconds; before answering that a
// topic is unknown, the listener calls CatchUpMetadata, which waits (bounded
// by the implementation and ctx) until this node has applied what the
// cluster had committed, so a topic created through another node a moment
// ago is found. It reports whether the metadata changed.
type MetadataCatchUp interface {
	CatchUpMetadata(ctx context.Context) bool
}
