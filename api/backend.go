// Package api is runnel's HTTP contract: the Backend interface a node
// implements (and the optional interfaces beside it), the request and
// response types, the error table and its RFC 9457 problem writer, the
// record codecs (the produce decoder, the consume encoder) and the
// middleware the server puts in front of everything (HostCheck,
// Authenticate, Authorize). The HTTP handler that serves openapi.yaml over
// this contract (chi router, one handler group per resource, request
// validation, the SSE live tail, the docs page, the node's HTTP limits) is
// package api/rest.
//
// api imports no other project package. It declares the narrow Backend interface
// the handler needs; server implements it. Optional features are optional interfaces
// (SeriesBackend, KafkaAPIVersionsBackend, ...) checked with a type assertion; a
// backend without one answers that endpoint with 501.
//
// JSON tags on the types below are the wire shapes of openapi.yaml; the handlers
// marshal them directly, so renaming a tag is a contract change.
package api

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Backend is what the HTTP API needs from a runnel node.
//
// Concurrency: every method is called from many request goroutines at once and
// must be safe for concurrent use. Methods taking a context return promptly
// (with ctx.Err() wrapped, or ErrTimeout) once it is done.
//
// Errors: wrap the api sentinel errors (fmt.Errorf("%w: ...", api.ErrUnknownTopic))
// to pick the HTTP status and problem type; any other error becomes a 500.
type Backend interface {
	// Cluster describes the cluster: id, controllers with their raft state, brokers.
	Cluster(ctx context.Context) (Cluster, error)
	// Brokers lists the registered brokers, ordered by id.
	Brokers(ctx context.Context) ([]Broker, error)

	// ListTopics lists the topics of one page ordered by name (internal
	// topics included): those starting with q.Prefix and sorting after
	// q.After, at most q.Limit (>= 1) of them, and whether more follow.
	// Per-topic figures (SizeBytes) are computed for the page only, so a
	// page costs the same whatever the number of topics.
	ListTopics(ctx context.Context, q ListQuery) (TopicPage, error)
	// CreateTopic creates a topic (through Raft). The name has been validated
	// (Kafka's rules) by api; configs have not: the backend validates them and
	// returns ErrInvalidConfig. ErrTopicExists when the name is taken.
	CreateTopic(ctx context.Context, req CreateTopicRequest) (TopicDetail, error)
	// DescribeTopic returns the topic with its partitions. ErrUnknownTopic.
	DescribeTopic(ctx context.Context, name string) (TopicDetail, error)
	// DeleteTopic deletes a topic. ErrUnknownTopic.
	DeleteTopic(ctx context.Context, name string) error
	// AlterTopicConfigs sets (non-nil value) or deletes (nil value: back to the
	// default) topic configs, all or nothing, and returns the updated topic.
	// ErrUnknownTopic, ErrInvalidConfig.
	AlterTopicConfigs(ctx context.Context, name string, set map[string]*string) (TopicDetail, error)

	// Produce appends records to a topic. The records of each partition are
	// appended atomically (one batch): on error nothing of that partition is
	// written, and api has already decoded and validated the whole request, so a
	// request rejected by api writes nothing. Records with Partition nil are placed
	// by the backend: murmur2 of the key like Kafka's default partitioner, or
	// sticky/round-robin without a key. acks is Kafka's: 0, 1 or -1 (all).
	// The result holds one RecordOffset per input record, in input order
	// (with acks=0 the offsets are -1).
	// Errors: ErrUnknownTopic, ErrUnknownPartition, ErrTooLarge (over
	// max.message.bytes), ErrNotEnoughReplicas, ErrNotLeader, ErrTimeout,
	// ErrStorage (the partition's disk refuses writes).
	Produce(ctx context.Context, topic string, records []ProduceRecord, acks int) ([]RecordOffset, error)

	// Consume reads one partition from req's position. When there is nothing to
	// read it waits up to req.Wait for new data (woken by appends, no busy
	// polling) and then returns an empty result; it also returns early when ctx
	// is done. Errors: ErrUnknownTopic, ErrUnknownPartition, ErrOffsetOutOfRange
	// (offset below the log start or above the high watermark), ErrNotLeader.
	Consume(ctx context.Context, req ConsumeRequest) (ConsumeResult, error)

	// Ready returns nil when the node serves requests, otherwise why not
	// (GET /readyz answers 503, write endpoints too). It must be cheap.
	Ready() error
}

// StorageBackend is optionally implemented by a Backend whose disks can
// fail: StorageError returns nil while every partition takes writes,
// otherwise (wrapping ErrStorage) which do not and why. GET /readyz answers
// 503 with it; other requests go on (reads, partitions on healthy disks).
// It must be cheap and safe for concurrent use.
type StorageBackend interface {
	StorageError() error
}

// SeriesBackend is optionally implemented by a Backend to feed the charts of the
// web UI (GET /v1/stats/series). Safe for concurrent use.
type SeriesBackend interface {
	Series(ctx context.Context) (Series, error)
}

// KafkaAPIVersionsBackend is optionally implemented by a Backend that runs the
// Kafka listener (GET /v1/kafka/api-versions). Safe for concurrent use.
type KafkaAPIVersionsBackend interface {
	KafkaAPIVersions(ctx context.Context) ([]KafkaAPIVersion, error)
}

// Offset positions for ConsumeRequest.Offset, as in Kafka's ListOffsets.
const (
	OffsetLatest   int64 = -1 // the high watermark: only records produced from now on
	OffsetEarliest int64 = -2 // the log start offset
)

// Acks values for Backend.Produce.
const (
	AcksNone   = 0
	AcksLeader = 1
	AcksAll    = -1
)

// Cluster is GET /v1/cluster.
type Cluster struct {
	ClusterID   string       `json:"cluster_id"`
	LeaderID    int32        `json:"leader_id"` // controller leader, -1 when unknown
	Controllers []Controller `json:"controllers"`
	Brokers     []Broker     `json:"brokers"`
	Node        *NodeSelf    `json:"node,omitempty"`
	// UnderReplicated and Offline count partitions whose ISR is smaller than
	// their replica set, and partitions without a leader.
	UnderReplicated int `json:"under_replicated_partitions"`
	Offline         int `json:"offline_partitions"`
}

// NodeSelf is the answering node and the metadata image it applied.
type NodeSelf struct {
	ID             int32    `json:"id"`
	Roles          []string `json:"roles"`
	MetadataOffset int64    `json:"metadata_offset"`
	MetadataDigest string   `json:"metadata_digest"`
	Build          *Build   `json:"build,omitempty"`
	// StorageError says why some of this node's partitions refuse writes
	// (disk full, I/O error); empty when its disks are healthy.
	StorageError string `json:"storage_error,omitempty"`
}

// Build identifies the binary a node runs (the same as `runnel version`).
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

// ControllerChange is the body of POST /v1/cluster/controllers.
type ControllerChange struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
}

// LeadersBackend is optionally implemented by a Backend that can run a
// preferred leader election on request (POST /v1/topics/{topic}/elect-leaders).
// Safe for concurrent use.
type LeadersBackend interface {
	ElectPreferredLeaders(ctx context.Context, topic string) (TopicDetail, error)
}

// ControllersBackend is optionally implemented by a Backend that can change
// the controller quorum (POST/DELETE /v1/cluster/controllers). Safe for
// concurrent use; each returns the cluster after the change.
type ControllersBackend interface {
	AddController(ctx context.Context, c ControllerChange) (Cluster, error)
	RemoveController(ctx context.Context, id int32) (Cluster, error)
}

// Controller is one Raft voter as seen from this node.
type Controller struct {
	ID          int32  `json:"id"`
	Address     string `json:"address"` // raft host:port
	Role        string `json:"role"`    // leader, follower, candidate, unknown
	Term        uint64 `json:"term"`
	LastIndex   uint64 `json:"last_index"`
	CommitIndex uint64 `json:"commit_index"`
}

// Broker states.
const (
	BrokerAlive        = "alive"
	BrokerFenced       = "fenced"
	BrokerShuttingDown = "shutting_down"
)

// Broker is one registered broker.
type Broker struct {
	ID             int32  `json:"id"`
	State          string `json:"state"` // BrokerAlive, BrokerFenced, BrokerShuttingDown
	Rack           string `json:"rack"`
	Epoch          int64  `json:"epoch"`
	MetadataOffset int64  `json:"metadata_offset"` // last metadata index it applied
	HTTPAddress    string `json:"http_address"`
	KafkaAddress   string `json:"kafka_address"`
	Partitions     int32  `json:"partitions"` // replicas hosted
	Leaders        int32  `json:"leaders"`    // partitions it leads
	// StorageError is set while some of the broker's partitions refuse
	// writes (disk full, I/O error), as its last heartbeat said.
	StorageError string `json:"storage_error,omitempty"`
}

// TopicSummary is one entry of GET /v1/topics.
type TopicSummary struct {
	Name              string `json:"name"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	SizeBytes         int64  `json:"size_bytes"` // on-disk size of the leader replicas, 0 if unknown
}

// ListQuery selects one page of a list ordered by name (GET /v1/topics,
// GET /v1/groups): the names starting with Prefix that sort after After, at
// most Limit of them.
type ListQuery struct {
	Prefix string // only names starting with it
	After  string // only names sorting after it ("" from the start)
	Limit  int    // at most this many, >= 1
}

// Values is q as the query parameters of a list request, for a backend that
// asks other nodes for their part of a list.
func (q ListQuery) Values() url.Values {
	v := url.Values{}
	if q.Prefix != "" {
		v.Set("prefix", q.Prefix)
	}
	if q.After != "" {
		v.Set("cursor", EncodeCursor(q.After))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Match reports whether name belongs to the list q pages through.
func (q ListQuery) Match(name string) bool {
	return strings.HasPrefix(name, q.Prefix) && name > q.After
}

// A list cursor is the last name of the page before, opaque to clients
// (base64url with a version prefix, so its form can change).
const cursorPrefix = "n1:"

// EncodeCursor is the cursor of the page after the one ending with last.
func EncodeCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + last))
}

// DecodeCursor is the last name of the page before c (a query.cursor
// field error for a cursor this server did not return).
func DecodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return "", &FieldError{Field: "query.cursor", Err: ErrInvalidRequest, Msg: "not a cursor this server returned"}
	}
	return strings.TrimPrefix(string(b), cursorPrefix), nil
}

// TopicPage is one page of topics and whether more follow it.
type TopicPage struct {
	Topics []TopicSummary
	More   bool
}

// PageNames applies q to every name there is: the names of the page, in
// order, and whether more follow. Backends use it so that every list pages
// the same way; it sorts only the names that pass the filters.
func PageNames(names []string, q ListQuery) ([]string, bool) {
	out := make([]string, 0, min(len(names), q.Limit+1))
	for _, n := range names {
		if q.Match(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) > q.Limit {
		return out[:q.Limit], true
	}
	return out, false
}

// CreateTopicRequest is the body of POST /v1/topics. Partitions and
// ReplicationFactor are -1 when the client left them out: the broker defaults.
type CreateTopicRequest struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

// TopicDetail is GET /v1/topics/{topic}.
type TopicDetail struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"` // topic id (UUID)
	ReplicationFactor int16             `json:"replication_factor"`
	Internal          bool              `json:"internal"`
	Configs           map[string]string `json:"configs"` // explicitly set configs
	Partitions        []PartitionDetail `json:"partitions"`
}

// PartitionDetail is one partition of a TopicDetail.
type PartitionDetail struct {
	Partition     int32   `json:"partition"`
	Leader        int32   `json:"leader"` // -1: offline
	LeaderEpoch   int32   `json:"leader_epoch"`
	Replicas      []int32 `json:"replicas"`
	ISR           []int32 `json:"isr"`
	StartOffset   int64   `json:"start_offset"`
	EndOffset     int64   `json:"end_offset"` // log end offset
	HighWatermark int64   `json:"high_watermark"`
	SizeBytes     int64   `json:"size_bytes"`

	// AddingReplicas and RemovingReplicas are set while a reassignment runs.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
}

// Header is one record header. Value nil is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// ProduceRecord is one record to append, already decoded to bytes by api.
// Key nil is a null key; Value nil is a null value (a tombstone).
// Timestamp nil means the append time.
type ProduceRecord struct {
	Partition *int32
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp *time.Time
}

// RecordOffset is where one produced record landed.
type RecordOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// ConsumeRequest reads one partition.
type ConsumeRequest struct {
	Topic     string
	Partition int32
	// Offset is the first offset to read, or OffsetEarliest / OffsetLatest.
	// Ignored when Timestamp is set.
	Offset int64
	// Timestamp, when set, starts at the first record whose timestamp is at or
	// after it (milliseconds since the epoch, Kafka's ListOffsets rule); if there
	// is none, at the high watermark.
	Timestamp *int64
	// MaxRecords caps the records returned (> 0).
	MaxRecords int
	// MaxBytes caps the sum of key+value+header bytes returned (> 0); at least
	// one record is returned even when it alone is larger.
	MaxBytes int
	// Wait is the long-poll budget when no record is available (0: no wait).
	Wait time.Duration
	// ReadUncommitted (isolation=read_uncommitted) reads up to the high
	// watermark, records of open and aborted transactions included. By
	// default (read_committed) the read stops at the last stable offset
	// and records of aborted transactions are left out.
	ReadUncommitted bool
	// IncludeControl (include_control=true, only with ReadUncommitted)
	// returns transaction markers as records with Control set, at their
	// offsets; by default their offsets are skipped.
	IncludeControl bool
}

// ConsumedRecord is one record read. Key and Value nil are null.
type ConsumedRecord struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
	// Transactional: the record belongs to a transaction (its batch has
	// the transactional attribute); JSON says "transactional":true only
	// then.
	Transactional bool
	// Control is set when the record is a transaction marker (only with
	// ConsumeRequest.IncludeControl); Key, Value and Headers are then nil.
	Control *ControlMarker
}

// ControlMarker is a commit or abort marker: the control record that ends
// one producer's transaction on a partition (JSON "control").
type ControlMarker struct {
	Type             string `json:"type"` // ControlCommit or ControlAbort
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
}

// ControlMarker types.
const (
	ControlCommit = "commit"
	ControlAbort  = "abort"
)

// ConsumeStreamer is a Backend that hands a consume's records to the
// handler one at a time, straight from the stored batches, so a JSON
// consume encodes each record into the output buffer with no slice of
// records and no copies of keys and values (issue 17). Backends without
// it are read through Consume.
type ConsumeStreamer interface {
	// ConsumeEach is Consume giving each record to each instead of
	// ConsumeResult.Records (left nil). rec, its key, value and headers
	// are valid only during the call. An error from each ends the read
	// and is returned. Errors before the first record are Consume's.
	ConsumeEach(ctx context.Context, req ConsumeRequest, each func(rec *ConsumedRecord) error) (ConsumeResult, error)
}

// ConsumeResult is what Consume read. NextOffset is the offset to ask for next
// (last returned offset + 1, or the resolved start position when no record was
// returned). Only records below the high watermark are returned.
type ConsumeResult struct {
	Records       []ConsumedRecord
	NextOffset    int64
	HighWatermark int64
	StartOffset   int64 // log start offset
}

// Series is GET /v1/stats/series: rates over the last hour for the UI charts.
// Every slice holds one value per bucket, oldest first, the last bucket being
// the one in progress; bucket i covers [StartMS + i*IntervalMS, + IntervalMS).
type Series struct {
	StartMS    int64         `json:"start_ms"`
	IntervalMS int64         `json:"interval_ms"`
	Topics     []TopicSeries `json:"topics"`
	Groups     []GroupSeries `json:"groups"`
}

// TopicSeries holds per-bucket counts for one topic (all partitions, all
// protocols).
type TopicSeries struct {
	Topic           string  `json:"topic"`
	ProducedRecords []int64 `json:"produced_records"`
	ProducedBytes   []int64 `json:"produced_bytes"`
	ConsumedRecords []int64 `json:"consumed_records"`
	ConsumedBytes   []int64 `json:"consumed_bytes"`
}

// GroupSeries holds a consumer group's total lag (records) sampled at the end
// of each bucket; -1 where it was not sampled.
type GroupSeries struct {
	Group string  `json:"group"`
	Lag   []int64 `json:"lag"`
}

// KafkaAPIVersion is one Kafka API key the Kafka listener supports.
type KafkaAPIVersion struct {
	APIKey     int16  `json:"api_key"`
	Name       string `json:"name"`
	MinVersion int16  `json:"min_version"`
	MaxVersion int16  `json:"max_version"`
}

// ReassignBackend is optionally implemented by a Backend that can move a
// partition to other replicas online (PUT and DELETE
// /v1/topics/{topic}/partitions/{partition}/replicas). Safe for concurrent
// use. ReassignPartition returns once the move started (it completes in the
// background); CancelReassignment once the partition is back on its
// original replicas, or ErrConflict when no move runs.
type ReassignBackend interface {
	ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (TopicDetail, error)
	CancelReassignment(ctx context.Context, topic string, partition int32) (TopicDetail, error)
}
