package server

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/runnel/runnel/api/rest"
	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/producers"
	"github.com/runnel/runnel/server/tlsreload"
	"github.com/runnel/runnel/server/txn"
)

// Role is what a process does in the cluster.
type Role string

const (
	RoleController Role = "controller"
	RoleBroker     Role = "broker"
)

// TLSFiles name the client-facing certificate material (package tlsreload).
type TLSFiles = tlsreload.Files

// Config is everything `runnel serve` is told.
type Config struct {
	NodeID              int32
	Roles               []Role
	DataDir             string
	HTTPAddr            string
	HTTPAdvertisedAddr  string
	KafkaAddr           string // empty disables the Kafka listener
	KafkaAdvertisedAddr string
	RaftAddr            string
	RaftAdvertisedAddr  string
	Controllers         []raftfsm.Server // empty: this node alone
	Rack                string
	// KafkaAutoCreateTopics lets Kafka Metadata requests create missing
	// topics with the defaults (auto.create.topics.enable). Off by default.
	KafkaAutoCreateTopics bool

	// BrokerHeartbeatInterval and BrokerSessionTimeout are Kafka's
	// broker.heartbeat.interval.ms and broker.session.timeout.ms: a broker
	// whose heartbeats lapse for the session timeout is fenced.
	BrokerHeartbeatInterval time.Duration
	BrokerSessionTimeout    time.Duration
	// ControllerElectionTimeout is the controllers' raft heartbeat and
	// election timeout and leader lease (--controller-election-timeout);
	// 0: quorum's defaults (1s with several voters; quorum's raftConfig
	// says what a failover takes and why not shorter).
	ControllerElectionTimeout time.Duration
	// ReplicaLagMax is replica.lag.time.max.ms: a follower not caught up
	// for this long leaves the ISR.
	ReplicaLagMax time.Duration
	// LeaderRebalanceInterval is how often the active controller moves
	// leadership back to preferred replicas; 0 disables it.
	LeaderRebalanceInterval time.Duration

	// Pprof serves Go's profiler at /debug/pprof/ on the HTTP listener.
	Pprof bool

	// MaxOpenFiles bounds the segment files kept open across all
	// partitions; 0 (the default) derives it from the process's descriptor
	// limit (filebudget.go).
	MaxOpenFiles int
	// Idle logs (issue 19): LogIdleTimeout closes the segment files of a
	// partition no one read or wrote for this long (0: kept until
	// --max-open-files needs room), checked by the maintenance round.
	LogIdleTimeout time.Duration
	// LogTailCacheBytes is the memory all partitions' in-memory tails
	// may hold (segments.TailCache): the batches each log appended last,
	// from which a follower's fetch of them is answered without opening
	// the segment file (issue 19); 0: none kept.
	LogTailCacheBytes int64
	MaintainInterval  time.Duration // retention, compaction, flush.ms checks
	ShutdownTimeout   time.Duration
	MaxBodyBytes      int64

	// HighWatermarkCheckpointInterval is how often the broker writes its
	// partitions' high watermarks to their one checkpoint file.
	HighWatermarkCheckpointInterval time.Duration

	// OffsetsTopicPartitions is the partition count __consumer_offsets is
	// created with on first use (0: 3).
	OffsetsTopicPartitions int32
	// ClusterSecret authenticates every connection between nodes (the
	// raft port: metadata, controller RPC, replication, forwarded HTTP);
	// all nodes of a cluster need the same one. Empty: the port accepts
	// anyone who can reach it (quorum.Config.ClusterSecret).
	ClusterSecret []byte
	// PeerTLS: inter-node mutual TLS with per-node certificates (the
	// certificate names runnel-node-<id>); not together with ClusterSecret.
	PeerTLS internode.PeerTLSFiles
	// InsecureInterNode lets a node whose raft port other machines can
	// reach run without inter-node authentication (refused otherwise).
	InsecureInterNode bool
	// HTTPLimits bound the HTTP listener (records per produce, memory in
	// flight, concurrent long polls, streams and connections).
	HTTPLimits rest.Limits

	// Connection budgets and peer trust (hostile input: replication and
	// producer state). The Kafka client port and the inter-broker door on
	// the raft port count their connections apart, so clients cannot
	// starve replication; 0 picks the kafkaproto default.
	KafkaMaxConnections       int // --kafka-max-connections
	KafkaMaxConnectionsPerIP  int // --kafka-max-connections-per-ip
	InterBrokerMaxConnections int // --inter-broker-max-connections
	// Connection creation rate per client address (KIP-612): new
	// connections per second one IP may open on each client door, with a
	// burst of twice that; over it a Kafka connection is closed and an
	// HTTP one answered 429. 0: unlimited.
	KafkaMaxConnectionRatePerIP int // --kafka-max-connection-rate-per-ip
	HTTPMaxConnectionRatePerIP  int // --http-max-connection-rate-per-ip
	// ProducerIDExpiration forgets an idempotent producer idle this long
	// (producer.id.expiration.ms); MaxProducerIDsPerPartition bounds a
	// partition's producer table. 0: the defaults.
	ProducerIDExpiration       time.Duration // --producer-id-expiration
	MaxProducerIDsPerPartition int           // --max-producer-ids-per-partition

	// Idempotent HTTP produce (Idempotency-Key): how long a partition
	// remembers a key and how many keys it remembers. 0: the defaults.
	IdempotencyKeyExpiration       time.Duration // --idempotency-key-expiration
	MaxIdempotencyKeysPerPartition int           // --max-idempotency-keys-per-partition

	// StorageRetryInterval is how often the broker looks for partitions
	// whose disk failed (full, I/O error) and first retries them; retries
	// back off to 30s while the disk still refuses writes.
	StorageRetryInterval time.Duration
	// MinFreeDisk is kept free on the partitions' filesystem (at most a
	// tenth of it): appends are refused below it, so the metadata store
	// on the same disk never runs out: it should be above
	// raftfsm.StateDiskFloor, which that store keeps (a start warns,
	// diskreserve.go). 0: no reserve.
	MinFreeDisk int64 // --min-free-disk

	// Client TLS: HTTPSAddr serves the HTTP API and UI over TLS (HTTP/1.1
	// and HTTP/2) beside or instead of HTTPAddr; TLS names the node's
	// certificate, key and optional client CA (mTLS), reloaded on SIGHUP
	// and when the files change.
	HTTPSAddr string
	TLS       TLSFiles
	// KafkaTLSAddr is the Kafka SSL listener (same certificate); clients
	// that connect to it are given every broker's SSL endpoint.
	KafkaTLSAddr           string
	KafkaTLSAdvertisedAddr string
	// Hostile batches: MaxDecompressedBatchBytes bounds what the records
	// of one produced batch may decompress to (0: the segments default).
	MaxDecompressedBatchBytes int64
	// BenchSkipRecordValidation appends batches checked as before record
	// validation existed (segments.Config.FramingOnly): the baseline of
	// BenchmarkKafkaProduceValidation only.
	BenchSkipRecordValidation bool
	// TestFaults are the chaos suite's clock offset and fsync delay and
	// the fail-stop tests' raft log segment size (testfaults.go; hidden
	// flags, off by default).
	TestFaults TestFaults

	// HTTPAllowedHosts are the names (or "*.suffix" patterns) besides
	// localhost, IP literals, the hostname and the advertised HTTP host that
	// the HTTP listener answers to in a Host header; "*" answers any
	// (api.HostCheck: DNS rebinding).
	HTTPAllowedHosts []string
	// Topic and partition limits (hostile input, issue 12): TopicLimits
	// bound the partitions and replicas a request may ask for (checked here
	// and again by the active controller); MaxTopicsPerRequest bounds the
	// topics of one Kafka CreateTopics or CreatePartitions request.
	TopicLimits         raftfsm.Limits
	MaxTopicsPerRequest int
	// Consumer groups (issue 18): the session timeouts a member may ask
	// for; outside them JoinGroup answers INVALID_SESSION_TIMEOUT.
	GroupMinSessionTimeout time.Duration // --group-min-session-timeout
	GroupMaxSessionTimeout time.Duration // --group-max-session-timeout
	// Kafka admin surface (issue 18): how long an admin change waits for
	// every alive broker to apply it before the call returns (0: no wait).
	MetadataPropagationTimeout time.Duration // --metadata-propagation-timeout
	// Transactions (issue 16): the longest transaction timeout a producer
	// may ask for, how long an idle transactional id is remembered, and
	// the partitions of __transaction_state when first created (0: 3).
	TransactionMaxTimeout      time.Duration // --transaction-max-timeout
	TransactionalIDExpiration  time.Duration // --transactional-id-expiration
	TransactionStatePartitions int32         // --transaction-state-partitions
	// Auth: users, SASL, superusers (issue 15; auth.go).
	Auth AuthConfig

	Logger *slog.Logger
	// LogLevel, when set, is the level Logger's handler reads: the
	// log.level broker config changes it at run time (brokerconfig.go).
	LogLevel *slog.LevelVar
}

// DefaultConfig is `runnel serve` with no flags.
func DefaultConfig() Config {
	return Config{
		NodeID:  1,
		Roles:   []Role{RoleController, RoleBroker},
		DataDir: "./data",
		// Loopback by default: with no flags a node is reachable only
		// from this machine, so --auth none is safe (authmode.go).
		HTTPAddr:                "127.0.0.1:8080",
		KafkaAddr:               "127.0.0.1:9092",
		RaftAddr:                "127.0.0.1:9093",
		BrokerHeartbeatInterval: 2 * time.Second,
		BrokerSessionTimeout:    9 * time.Second,
		ReplicaLagMax:           30 * time.Second,
		LeaderRebalanceInterval: 30 * time.Second,
		MaxOpenFiles:            0, // from the descriptor limit
		LogIdleTimeout:          10 * time.Minute,
		LogTailCacheBytes:       segments.DefaultTailBudget,
		MaintainInterval:        5 * time.Second,
		StorageRetryInterval:    time.Second,
		MinFreeDisk:             64 << 20,
		ShutdownTimeout:         20 * time.Second,
		MaxBodyBytes:            16 << 20,

		KafkaMaxConnections:       kafkaproto.DefaultMaxConnections,
		KafkaMaxConnectionsPerIP:  kafkaproto.DefaultMaxConnectionsPerIP,
		InterBrokerMaxConnections: kafkaproto.DefaultMaxPeerConnections,
		// Connection creation rate per address.
		KafkaMaxConnectionRatePerIP: DefaultMaxConnectionRatePerIP,
		HTTPMaxConnectionRatePerIP:  DefaultMaxConnectionRatePerIP,
		ProducerIDExpiration:        producers.DefaultIDExpiration,
		MaxProducerIDsPerPartition:  producers.DefaultMaxIDsPerPartition,
		HTTPLimits:                  rest.DefaultLimits,
		MaxDecompressedBatchBytes:   segments.DefaultMaxInflatedBytes,

		HighWatermarkCheckpointInterval: 5 * time.Second, // Kafka's replica.high.watermark.checkpoint.interval.ms

		// Idempotent HTTP produce.
		IdempotencyKeyExpiration:       producers.DefaultKeyExpiration,
		MaxIdempotencyKeysPerPartition: producers.DefaultMaxKeysPerPartition,

		TopicLimits: raftfsm.Limits{
			MaxPartitionsPerTopic: 10_000,
			MaxReplicationFactor:  16,
			MaxPartitions:         200_000,
			MaxBrokerPartitions:   100_000,
		},
		MaxTopicsPerRequest:        1000,
		GroupMinSessionTimeout:     6 * time.Second,  // Kafka's group.min.session.timeout.ms
		GroupMaxSessionTimeout:     30 * time.Minute, // Kafka's group.max.session.timeout.ms
		MetadataPropagationTimeout: 2 * time.Second,
		TransactionMaxTimeout:      txn.DefaultMaxTimeout,
		TransactionalIDExpiration:  txn.DefaultIDExpiration,
	}
}

// HasRole reports whether the process plays r.
func (c Config) HasRole(r Role) bool {
	for _, have := range c.Roles {
		if have == r {
			return true
		}
	}
	return false
}

// ParseRoles parses "controller,broker".
func ParseRoles(s string) ([]Role, error) {
	var roles []Role
	for _, part := range strings.Split(s, ",") {
		switch r := Role(strings.TrimSpace(part)); r {
		case RoleController, RoleBroker:
			roles = append(roles, r)
		case "":
		default:
			return nil, fmt.Errorf("unknown role %q (want controller, broker or both)", part)
		}
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("no roles given")
	}
	return roles, nil
}

// ParseControllers parses "1@host:port,2@host:port".
func ParseControllers(s string) ([]raftfsm.Server, error) {
	var out []raftfsm.Server
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idStr, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("controller %q: want id@host:port", part)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller %q: bad id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller %q: %w", part, err)
		}
		out = append(out, raftfsm.Server{ID: int32(id), Address: addr})
	}
	return out, nil
}

// advertised returns adv, or addr with an unspecified host replaced by a
// name peers can dial.
func advertised(adv, addr string) string {
	if adv != "" || addr == "" {
		return adv
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// RecoverQuorum rewrites the metadata quorum's voters in a stopped node's
// data dir (quorum.RecoverQuorum): the documented way back from a lost
// quorum (`runnel recover-quorum`).
func RecoverQuorum(dataDir string, nodeID int32, voters []raftfsm.Server, logger *slog.Logger) error {
	return quorum.RecoverQuorum(quorum.Config{NodeID: nodeID, Dir: filepath.Join(dataDir, "meta"), Logger: logger}, voters)
}
