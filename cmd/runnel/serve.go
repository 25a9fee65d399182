package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/runnel/runnel/api/rest"
	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server"
)

// serveFlags are the `runnel serve` flags. Each may also come from the
// environment (RUNNEL_<NAME>, dashes as underscores) or from the YAML config
// file given by --config (keys are the flag names); a flag on the command line
// wins over the environment, which wins over the file.
type serveFlags struct {
	configFile string
	nodeID     int32
	roles      string
	dataDir    string
	httpAddr   string
	httpAdv    string
	kafkaAddr  string
	kafkaAdv   string
	raftAddr   string
	raftAdv    string
	ctrls      string
	rack       string
	logLevel   string
	logFormat  string
	maxFiles   int
	logIdle    time.Duration
	tailBytes  int64
	hwmEvery   time.Duration
	autoCreate bool
	heartbeat  time.Duration
	session    time.Duration
	election   time.Duration
	lagMax     time.Duration
	rebalance  time.Duration
	offsetsTP  int32
	pprof      bool
	secret     string
	secretFile string

	// Connection budgets and producer state (hostile input, h2).
	kafkaMaxConns      int
	kafkaMaxConnsPerIP int
	// Connection creation rate per client address.
	kafkaConnRatePerIP, httpConnRatePerIP int
	peerMaxConns                          int
	producerExpiration                    time.Duration
	maxProducerIDs                        int
	// Idempotent HTTP produce.
	idemKeyExpiration time.Duration
	maxIdemKeys       int

	// storage (disk full, I/O errors)
	storageRetry time.Duration
	minFreeDisk  int64

	// Client TLS (HTTPS, certificate files).
	httpsAddr   string
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	kafkaTLS    string
	kafkaTLSAdv string

	// Inter-node authentication (mTLS certificates).
	clusterCA     string
	nodeCert      string
	nodeKey       string
	insecurePeers bool

	httpLimits rest.Limits
	// hostile batches
	maxInflated int64
	benchSkip   bool
	testFaults  server.TestFaults

	// Host header check (DNS rebinding)
	allowedHosts string
	topicLimits
	auth   authFlags  // serve_auth.go
	groups groupFlags // serve_groups.go
	admin  adminFlags // serve_admin.go
	txn    txnFlags   // serve_txn.go
}

// topicLimits are the partition and topic limits (hostile input, issue 12).
type topicLimits struct {
	maxPartitionsPerTopic int32
	maxReplicationFactor  int16
	maxPartitions         int64
	maxBrokerPartitions   int64
	maxTopicsPerRequest   int
}

// Limits on what one admin request may create; defaults in server.DefaultConfig.
func (l *topicLimits) register(fs *pflag.FlagSet, def server.Config) {
	fs.Int32Var(&l.maxPartitionsPerTopic, "max-partitions-per-topic", def.TopicLimits.MaxPartitionsPerTopic, "most partitions one topic may have")
	fs.Int16Var(&l.maxReplicationFactor, "max-replication-factor", def.TopicLimits.MaxReplicationFactor, "largest replication factor a topic may have (never more than the alive brokers)")
	fs.Int64Var(&l.maxPartitions, "max-partitions", def.TopicLimits.MaxPartitions, "most partitions in the cluster, all topics together (0: unlimited)")
	fs.Int64Var(&l.maxBrokerPartitions, "max-broker-partitions", def.TopicLimits.MaxBrokerPartitions, "most partition replicas placed on one broker (0: unlimited)")
	fs.IntVar(&l.maxTopicsPerRequest, "max-topics-per-request", def.MaxTopicsPerRequest, "most topics in one Kafka CreateTopics or CreatePartitions request")
}

func (l *topicLimits) apply(cfg *server.Config) error {
	if l.maxPartitionsPerTopic < 1 || l.maxPartitionsPerTopic > raftfsm.HardMaxPartitionsPerTopic {
		return fmt.Errorf("--max-partitions-per-topic: %d is not between 1 and %d", l.maxPartitionsPerTopic, raftfsm.HardMaxPartitionsPerTopic)
	}
	if l.maxReplicationFactor < 1 || l.maxReplicationFactor > raftfsm.HardMaxReplicationFactor {
		return fmt.Errorf("--max-replication-factor: %d is not between 1 and %d", l.maxReplicationFactor, raftfsm.HardMaxReplicationFactor)
	}
	if l.maxPartitions < 0 || l.maxBrokerPartitions < 0 || l.maxTopicsPerRequest < 1 {
		return fmt.Errorf("--max-partitions, --max-broker-partitions: want 0 or more; --max-topics-per-request: 1 or more")
	}
	cfg.TopicLimits = raftfsm.Limits{
		MaxPartitionsPerTopic: l.maxPartitionsPerTopic,
		MaxReplicationFactor:  l.maxReplicationFactor,
		MaxPartitions:         l.maxPartitions,
		MaxBrokerPartitions:   l.maxBrokerPartitions,
	}
	cfg.MaxTopicsPerRequest = l.maxTopicsPerRequest
	return nil
}

func newServeCommand() *cobra.Command {
	cmd, _ := serveCommand()
	return cmd
}

// serveCommand is the serve command and the flags it fills.
func serveCommand() (*cobra.Command, *serveFlags) {
	def := server.DefaultConfig()
	f := new(serveFlags)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a runnel node (controller, broker or both)",
		Long: "Run a runnel node. With no flags: a complete single-node cluster on ./data,\n" +
			"HTTP and the UI on 127.0.0.1:8080, the Kafka listener on 127.0.0.1:9092.\n\n" +
			"Every flag can also be set as RUNNEL_<FLAG> (e.g. RUNNEL_DATA_DIR) or in the\n" +
			"YAML file named by --config (keys are flag names).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvAndFile(cmd.Flags(), f.configFile); err != nil {
				return err
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.configFile, "config", "", "YAML config file (keys are flag names)")
	fs.Int32Var(&f.nodeID, "node-id", def.NodeID, "this node's id, unique in the cluster")
	fs.StringVar(&f.roles, "roles", "controller,broker", "roles: controller, broker, or both")
	fs.StringVar(&f.dataDir, "data-dir", def.DataDir, "directory for partitions and metadata")
	fs.StringVar(&f.httpAddr, "http-addr", def.HTTPAddr, "HTTP API and UI listen address")
	fs.StringVar(&f.httpAdv, "http-advertised-addr", "", "HTTP address other nodes and clients use (default: from --http-addr)")
	fs.StringVar(&f.kafkaAddr, "kafka-addr", def.KafkaAddr, "Kafka protocol listen address; empty disables it")
	fs.StringVar(&f.kafkaAdv, "kafka-advertised-addr", "", "Kafka address given to clients in Metadata (default: from --kafka-addr)")
	fs.BoolVar(&f.autoCreate, "kafka-auto-create-topics", false, "let Kafka clients create missing topics by asking for their metadata")
	fs.StringVar(&f.raftAddr, "raft-addr", def.RaftAddr, "Raft listen address (controllers)")
	fs.StringVar(&f.raftAdv, "raft-advertised-addr", "", "Raft address peers dial (default: from --raft-addr)")
	fs.StringVar(&f.ctrls, "controllers", "", "controller quorum as id@host:port,... (default: this node alone)")
	fs.StringVar(&f.rack, "rack", "", "rack or zone of this broker, for rack-aware placement")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&f.heartbeat, "broker-heartbeat-interval", def.BrokerHeartbeatInterval, "how often a broker heartbeats to the active controller")
	fs.DurationVar(&f.session, "broker-session-timeout", def.BrokerSessionTimeout, "a broker whose heartbeats lapse this long is fenced")
	// controller failover (issue 19)
	fs.DurationVar(&f.election, "controller-election-timeout", 0, "raft heartbeat and election timeout (and leader lease) of the controllers, the same on every node (0: 1s with several controllers, 100ms for one): a crashed active controller is replaced one to three of it later (two on average; one that stops hands over at once); too short for the network or the machines' load and leaders change needlessly (300ms fails over in under a second, and churned at load 20 to 40 on 2 cores)")
	fs.DurationVar(&f.lagMax, "replica-lag-time-max", def.ReplicaLagMax, "a follower not caught up for this long leaves the in-sync replicas")
	fs.DurationVar(&f.rebalance, "leader-rebalance-interval", def.LeaderRebalanceInterval, "how often the active controller moves leadership back to preferred replicas (0 disables)")
	fs.Int32Var(&f.offsetsTP, "offsets-topic-partitions", 0, "partitions of __consumer_offsets when it is first created (0: 3)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP listener")
	fs.IntVar(&f.maxFiles, "max-open-files", def.MaxOpenFiles, "segment files kept open across all partitions (0: the process's descriptor limit less --kafka-max-connections, --inter-broker-max-connections and 2,048 for the rest, at least 1,024; a start warns when a value given leaves less, or the limit is under 2,048)")
	// idle logs (issue 19)
	fs.Int64Var(&f.tailBytes, "log-tail-cache-bytes", def.LogTailCacheBytes, "memory for the batches each partition appended last (at most 1 MiB of one partition), from which followers' and consumers' reads of them are answered without opening the segment file; the partitions appended to least recently give theirs up first (0: none kept)")
	fs.DurationVar(&f.logIdle, "log-idle-timeout", def.LogIdleTimeout, "a partition's segment files not read or written for this long are closed (the next use opens them again); 0: kept until --max-open-files needs room")
	fs.DurationVar(&f.hwmEvery, "high-watermark-checkpoint-interval", def.HighWatermarkCheckpointInterval, "how often the high watermarks of all partitions are written to their data directory's one checkpoint file, when one moved (Kafka's replica.high.watermark.checkpoint.interval.ms); a lowered mark is written at once, and all of them when the node stops")
	// storage (disk full, I/O errors)
	fs.DurationVar(&f.storageRetry, "storage-retry-interval", def.StorageRetryInterval, "how often partitions whose disk failed (full, I/O error) are looked for and retried; retries back off to 30s")
	fs.Int64Var(&f.minFreeDisk, "min-free-disk", def.MinFreeDisk, "bytes kept free on the partitions' filesystem (at most a tenth of it): appends are refused below it, so the metadata store on the same disk never runs out (0: none)")
	// Host header check (DNS rebinding)
	fs.StringVar(&f.allowedHosts, "http-allowed-hosts", "", "comma-separated host names (or *.domain) the HTTP API answers to besides localhost, IP addresses, this machine's hostname and the advertised HTTP host; other Host headers get 421 (DNS rebinding). \"*\": any")
	fs.StringVar(&f.secret, "cluster-secret", "", "shared secret every node must hold to talk to the others on the raft port (prefer RUNNEL_CLUSTER_SECRET or --cluster-secret-file: a flag shows in ps); empty: unauthenticated")
	fs.StringVar(&f.secretFile, "cluster-secret-file", "", "file holding the cluster secret (surrounding whitespace trimmed)")
	// Connection budgets and producer state (hostile input, h2).
	fs.IntVar(&f.kafkaMaxConns, "kafka-max-connections", def.KafkaMaxConnections, "open connections on the Kafka client port; more are closed at once")
	fs.IntVar(&f.kafkaMaxConnsPerIP, "kafka-max-connections-per-ip", def.KafkaMaxConnectionsPerIP, "open Kafka client connections from one IP address")
	// Connection creation rate per client address (KIP-612).
	fs.IntVar(&f.kafkaConnRatePerIP, "kafka-max-connection-rate-per-ip", def.KafkaMaxConnectionRatePerIP, "new Kafka client connections per second from one IP address (burst twice that); faster ones are closed at once; 0: unlimited")
	fs.IntVar(&f.httpConnRatePerIP, "http-max-connection-rate-per-ip", def.HTTPMaxConnectionRatePerIP, "new HTTP(S) connections per second from one IP address (burst twice that); faster ones are answered 429 and closed; 0: unlimited")
	fs.IntVar(&f.peerMaxConns, "inter-broker-max-connections", def.InterBrokerMaxConnections, "open inter-broker (replication) connections on the raft port, counted apart from clients")
	fs.DurationVar(&f.producerExpiration, "producer-id-expiration", def.ProducerIDExpiration, "an idempotent producer idle this long is forgotten (Kafka's producer.id.expiration.ms)")
	fs.IntVar(&f.maxProducerIDs, "max-producer-ids-per-partition", def.MaxProducerIDsPerPartition, "idempotent producers a partition remembers; the longest idle are dropped first")
	// Idempotent HTTP produce (Idempotency-Key).
	fs.DurationVar(&f.idemKeyExpiration, "idempotency-key-expiration", def.IdempotencyKeyExpiration, "how long an HTTP produce's Idempotency-Key is remembered: a retry within it writes nothing")
	fs.IntVar(&f.maxIdemKeys, "max-idempotency-keys-per-partition", def.MaxIdempotencyKeysPerPartition, "Idempotency-Keys a partition remembers; the oldest are dropped first")
	// Client TLS (HTTPS, certificate files).
	fs.StringVar(&f.httpsAddr, "https-addr", "", "HTTPS (HTTP/1.1 and HTTP/2) listen address for the API and UI, beside or instead of --http-addr; needs --tls-cert-file")
	fs.StringVar(&f.tlsCert, "tls-cert-file", "", "PEM certificate (chain) the node shows clients; reloaded on SIGHUP and when the file changes")
	fs.StringVar(&f.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&f.clusterCA, "cluster-ca-file", "", "PEM CA of the cluster: inter-node connections use mutual TLS and a peer's certificate must chain to it")
	fs.StringVar(&f.nodeCert, "node-cert-file", "", "PEM certificate of this node for inter-node TLS; must name runnel-node-<id> (`runnel certs create` writes one)")
	fs.StringVar(&f.nodeKey, "node-key-file", "", "PEM private key of --node-cert-file")
	fs.BoolVar(&f.insecurePeers, "insecure-inter-node", false, "run without inter-node authentication although the raft port is reachable from other machines (anyone who reaches it can join, replicate and change metadata)")
	fs.StringVar(&f.kafkaTLS, "kafka-tls-addr", "", "Kafka SSL listen address (same certificate as HTTPS), beside or instead of --kafka-addr")
	fs.StringVar(&f.kafkaTLSAdv, "kafka-tls-advertised-addr", "", "Kafka SSL address given to clients in Metadata (default: from --kafka-tls-addr)")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca-file", "", "PEM CA certificates; when set, TLS clients must present a certificate they signed (mTLS)")
	addHTTPLimitFlags(fs, &f.httpLimits)
	// Hostile batches.
	fs.Int64Var(&f.maxInflated, "max-decompressed-batch-bytes", def.MaxDecompressedBatchBytes, "largest size the records of one produced batch may decompress to; larger batches are refused (Kafka INVALID_RECORD, HTTP 413)")
	f.topicLimits.register(fs, def)
	f.groups.register(fs, def)
	f.admin.register(fs, def)
	f.txn.register(fs, def)
	f.auth.register(fs)
	fs.BoolVar(&f.benchSkip, "bench-skip-record-validation", false, "benchmark baseline only: append batches without validating their records")
	_ = fs.MarkHidden("bench-skip-record-validation")
	// Test-only faults (the chaos suite, server/testfaults.go): hidden.
	fs.BoolVar(&f.testFaults.Enabled, "test-faults", false, "tests only: read the wall-clock offset and fsync delay from <data-dir>/test-faults while running")
	fs.DurationVar(&f.testFaults.ClockOffset, "test-clock-offset", 0, "tests only (with --test-faults): added to the wall clock")
	fs.DurationVar(&f.testFaults.FsyncDelay, "test-fsync-delay", 0, "tests only (with --test-faults): every partition fsync waits this long first")
	fs.IntVar(&f.testFaults.RaftLogSegmentBytes, "test-raft-log-segment-bytes", 0, "tests only: the metadata log's segment size (0: 4 MiB)")
	for _, name := range []string{"test-faults", "test-clock-offset", "test-fsync-delay", "test-raft-log-segment-bytes"} {
		_ = fs.MarkHidden(name)
	}
	return cmd, f
}

// Bounds of --test-raft-log-segment-bytes besides 0 (the default): raft-wal
// preallocates each segment, so a huge value takes that much disk at
// once, and a segment must hold more than its header and one index frame.
const (
	minRaftLogSegmentBytes = 4 << 10
	maxRaftLogSegmentBytes = 1 << 30
)

func (f *serveFlags) config() (server.Config, error) {
	cfg := server.DefaultConfig()
	roles, err := server.ParseRoles(f.roles)
	if err != nil {
		return cfg, fmt.Errorf("--roles: %w", err)
	}
	ctrls, err := server.ParseControllers(f.ctrls)
	if err != nil {
		return cfg, fmt.Errorf("--controllers: %w", err)
	}
	logger, level, err := newLevelLogger(f.logLevel, f.logFormat)
	if err != nil {
		return cfg, err
	}
	cfg.LogLevel = level
	cfg.NodeID = f.nodeID
	cfg.Roles = roles
	cfg.DataDir = f.dataDir
	cfg.HTTPAddr, cfg.HTTPAdvertisedAddr = f.httpAddr, f.httpAdv
	cfg.KafkaAddr, cfg.KafkaAdvertisedAddr = f.kafkaAddr, f.kafkaAdv
	cfg.RaftAddr, cfg.RaftAdvertisedAddr = f.raftAddr, f.raftAdv
	cfg.Controllers = ctrls
	cfg.Rack = f.rack
	cfg.KafkaAutoCreateTopics = f.autoCreate
	cfg.BrokerHeartbeatInterval, cfg.BrokerSessionTimeout = f.heartbeat, f.session
	cfg.ControllerElectionTimeout = f.election
	cfg.ReplicaLagMax = f.lagMax
	cfg.LeaderRebalanceInterval = f.rebalance
	cfg.OffsetsTopicPartitions = f.offsetsTP
	cfg.Pprof = f.pprof
	cfg.MaxOpenFiles = f.maxFiles
	cfg.LogIdleTimeout = f.logIdle
	cfg.LogTailCacheBytes = f.tailBytes
	cfg.HighWatermarkCheckpointInterval = f.hwmEvery
	// Connection budgets and producer state (hostile input, h2).
	cfg.KafkaMaxConnections = f.kafkaMaxConns
	cfg.KafkaMaxConnectionsPerIP = f.kafkaMaxConnsPerIP
	cfg.KafkaMaxConnectionRatePerIP, cfg.HTTPMaxConnectionRatePerIP = f.kafkaConnRatePerIP, f.httpConnRatePerIP
	cfg.InterBrokerMaxConnections = f.peerMaxConns
	cfg.ProducerIDExpiration = f.producerExpiration
	cfg.MaxProducerIDsPerPartition = f.maxProducerIDs
	cfg.IdempotencyKeyExpiration, cfg.MaxIdempotencyKeysPerPartition = f.idemKeyExpiration, f.maxIdemKeys

	if f.storageRetry <= 0 {
		return cfg, fmt.Errorf("--storage-retry-interval must be positive")
	}
	cfg.StorageRetryInterval = f.storageRetry
	cfg.MinFreeDisk = max(f.minFreeDisk, 0)
	// Client TLS (HTTPS, certificate files).
	cfg.HTTPSAddr = f.httpsAddr
	cfg.KafkaTLSAddr, cfg.KafkaTLSAdvertisedAddr = f.kafkaTLS, f.kafkaTLSAdv
	cfg.PeerTLS = internode.PeerTLSFiles{CAFile: f.clusterCA, CertFile: f.nodeCert, KeyFile: f.nodeKey}
	cfg.InsecureInterNode = f.insecurePeers
	cfg.TLS = server.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, ClientCAFile: f.tlsClientCA}
	cfg.HTTPLimits = f.httpLimits
	cfg.MaxDecompressedBatchBytes = f.maxInflated
	for _, h := range strings.Split(f.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.HTTPAllowedHosts = append(cfg.HTTPAllowedHosts, h)
		}
	}
	if err := f.topicLimits.apply(&cfg); err != nil {
		return cfg, err
	}
	if err := f.txn.apply(&cfg); err != nil {
		return cfg, err
	}
	if err := f.groups.apply(&cfg); err != nil {
		return cfg, err
	}
	if err := f.admin.apply(&cfg); err != nil {
		return cfg, err
	}
	if err := f.auth.apply(&cfg); err != nil {
		return cfg, err
	}
	cfg.BenchSkipRecordValidation = f.benchSkip
	if n := f.testFaults.RaftLogSegmentBytes; n != 0 && (n < minRaftLogSegmentBytes || n > maxRaftLogSegmentBytes) {
		return cfg, fmt.Errorf("--test-raft-log-segment-bytes: %d is not 0 (the default) or between %d and %d", n, minRaftLogSegmentBytes, maxRaftLogSegmentBytes)
	}
	cfg.TestFaults = f.testFaults
	if cfg.ClusterSecret, err = f.clusterSecret(); err != nil {
		return cfg, err
	}
	cfg.Logger = logger
	return cfg, nil
}

// clusterSecret is --cluster-secret, or the trimmed content of
// --cluster-secret-file; not both.
func (f *serveFlags) clusterSecret() ([]byte, error) {
	if f.secretFile == "" {
		return []byte(f.secret), nil
	}
	if f.secret != "" {
		return nil, fmt.Errorf("--cluster-secret and --cluster-secret-file: give one, not both")
	}
	raw, err := os.ReadFile(f.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--cluster-secret-file: %w", err)
	}
	secret := bytes.TrimSpace(raw)
	if len(secret) == 0 {
		return nil, fmt.Errorf("--cluster-secret-file: %s is empty", f.secretFile)
	}
	return secret, nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	logger, _, err := newLevelLogger(level, format)
	return logger, err
}

// newLevelLogger is newLogger with its level in a LevelVar, so the
// log.level broker config can change it while the node runs.
func newLevelLogger(level, format string) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), lv, nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), lv, nil
	}
	return nil, nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// envName is the environment variable for a flag: node-id -> RUNNEL_NODE_ID.
func envName(flag string) string {
	return "RUNNEL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnvAndFile fills every flag not given on the command line from the
// environment, then from the config file.
func applyEnvAndFile(fs *pflag.FlagSet, file string) error {
	if file == "" {
		file = os.Getenv(envName("config"))
	}
	fileValues := map[string]any{}
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read config file: %w", err)
		}
		if err := yaml.Unmarshal(raw, &fileValues); err != nil {
			return fmt.Errorf("parse config file %s: %w", file, err)
		}
		for key := range fileValues {
			if fs.Lookup(key) == nil {
				return fmt.Errorf("config file %s: unknown key %q", file, key)
			}
		}
	}
	var firstErr error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed || firstErr != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(fl.Name)); ok {
			if err := fs.Set(fl.Name, v); err != nil {
				firstErr = fmt.Errorf("%s: %w", envName(fl.Name), err)
			}
			return
		}
		if v, ok := fileValues[fl.Name]; ok {
			if err := fs.Set(fl.Name, fmt.Sprint(v)); err != nil {
				firstErr = fmt.Errorf("config file key %s: %w", fl.Name, err)
			}
		}
	})
	return firstErr
}
