package server

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
)

// Broker configs as Kafka clients see them (DescribeConfigs,
// IncrementalAlterConfigs and AlterConfigs on a BROKER resource): the
// `runnel serve` flags that have a Kafka counterpart, named as Kafka names
// them, with STATIC_BROKER_CONFIG when the value differs from the flag's
// default and DEFAULT_CONFIG otherwise (a flag given with its default
// value reads as the default). The one config runnel can change while
// running is log.level (--log-level), also reachable as the "root" logger
// of the node's BROKER_LOGGER resource; altering any other is refused with
// INVALID_CONFIG, as Kafka refuses configs that are not dynamic. A dynamic
// value lives in this process only: a restart goes back to the flag (Kafka
// keeps per-broker dynamic configs in its metadata; runnel does not yet).

// logLevelConfig is the dynamic broker config naming --log-level.
const logLevelConfig = "log.level"

// brokerConfigDef is one broker config: its value in a Config and its
// Kafka ConfigType (1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 7 LIST).
type brokerConfigDef struct {
	name  string
	kind  int8
	value func(c *Config) string
	doc   string
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

var brokerConfigDefs = []brokerConfigDef{
	{"node.id", 3, func(c *Config) string { return strconv.Itoa(int(c.NodeID)) }, "--node-id"},
	{"broker.id", 3, func(c *Config) string { return strconv.Itoa(int(c.NodeID)) }, "--node-id"},
	{"process.roles", 7, func(c *Config) string { return joinRoles(c.Roles) }, "--roles"},
	{"log.dirs", 2, func(c *Config) string { return c.DataDir }, "--data-dir (partitions live in its partitions/ directory)"},
	{"listeners", 7, func(c *Config) string { return listeners(c.KafkaAddr, c.KafkaTLSAddr) }, "--kafka-addr, --kafka-tls-addr"},
	{"advertised.listeners", 7, func(c *Config) string { return listeners(c.KafkaAdvertisedAddr, c.KafkaTLSAdvertisedAddr) }, "the advertised Kafka addresses"},
	{"broker.rack", 2, func(c *Config) string { return c.Rack }, "--rack"},
	{"auto.create.topics.enable", 1, func(c *Config) string { return strconv.FormatBool(c.KafkaAutoCreateTopics) }, "--kafka-auto-create-topics"},
	{"broker.heartbeat.interval.ms", 3, func(c *Config) string { return ms(c.BrokerHeartbeatInterval) }, "--broker-heartbeat-interval"},
	{"broker.session.timeout.ms", 3, func(c *Config) string { return ms(c.BrokerSessionTimeout) }, "--broker-session-timeout"},
	{"replica.lag.time.max.ms", 5, func(c *Config) string { return ms(c.ReplicaLagMax) }, "--replica-lag-time-max"},
	{"auto.leader.rebalance.enable", 1, func(c *Config) string { return strconv.FormatBool(c.LeaderRebalanceInterval > 0) }, "--leader-rebalance-interval is not 0"},
	{"leader.imbalance.check.interval.seconds", 5, func(c *Config) string {
		return strconv.FormatInt(int64(c.LeaderRebalanceInterval/time.Second), 10)
	}, "--leader-rebalance-interval"},
	{"offsets.topic.num.partitions", 3, func(c *Config) string { return strconv.Itoa(int(c.OffsetsTopicPartitions)) }, "partitions of __consumer_offsets (0: 3)"},
	{"max.connections", 3, func(c *Config) string { return strconv.Itoa(c.KafkaMaxConnections) }, "--kafka-max-connections"},
	{"max.connections.per.ip", 3, func(c *Config) string { return strconv.Itoa(c.KafkaMaxConnectionsPerIP) }, "--kafka-max-connections-per-ip"},
	{"producer.id.expiration.ms", 3, func(c *Config) string { return ms(c.ProducerIDExpiration) }, "--producer-id-expiration"},
	{"socket.request.max.bytes", 3, func(c *Config) string { return strconv.FormatInt(c.MaxBodyBytes, 10) }, "--max-body-bytes"},
	// What a topic created without them gets (fixed in runnel).
	{"num.partitions", 3, func(*Config) string { return strconv.Itoa(admin.DefaultPartitions) }, "partitions of a topic created without a count"},
	{"default.replication.factor", 3, func(*Config) string { return strconv.Itoa(admin.DefaultReplicationFactor) }, "replication factor of a topic created without one"},
	{"log.segment.bytes", 3, topicDefault("segment.bytes"), "segment.bytes of a topic that does not set it"},
	{"log.roll.ms", 5, topicDefault("segment.ms"), "segment.ms of a topic that does not set it"},
	{"log.retention.ms", 5, topicDefault("retention.ms"), "retention.ms of a topic that does not set it"},
	{"log.retention.bytes", 5, topicDefault("retention.bytes"), "retention.bytes of a topic that does not set it"},
	{"log.cleanup.policy", 7, topicDefault("cleanup.policy"), "cleanup.policy of a topic that does not set it"},
	{"message.max.bytes", 3, topicDefault("max.message.bytes"), "max.message.bytes of a topic that does not set it"},
	{"min.insync.replicas", 3, topicDefault("min.insync.replicas"), "min.insync.replicas of a topic that does not set it"},
	{"unclean.leader.election.enable", 1, topicDefault("unclean.leader.election.enable"), "unclean.leader.election.enable of a topic that does not set it"},
}

// topicDefault is the value a topic config has when a topic does not set it.
func topicDefault(name string) func(*Config) string {
	return func(*Config) string { return broker.EffectiveConfig(nil, name) }
}

func joinRoles(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

func listeners(plain, tls string) string {
	var out []string
	if plain != "" {
		out = append(out, "PLAINTEXT://"+plain)
	}
	if tls != "" {
		out = append(out, "SSL://"+tls)
	}
	return strings.Join(out, ",")
}

// brokerDynamic holds the dynamic broker configs set at run time.
type brokerDynamic struct {
	mu       sync.Mutex
	logLevel *string // set by an admin; nil: the flag's; guarded by mu
	// startLevel is --log-level, what deleting log.level goes back to.
	// Set in Open, read-only after.
	startLevel slog.Level
}

// brokerConfigs describes this node's broker configs, sorted by name.
func (s *Server) brokerConfigs() []kafkaproto.ConfigEntry {
	def := DefaultConfig()
	out := make([]kafkaproto.ConfigEntry, 0, len(brokerConfigDefs)+1)
	for _, d := range brokerConfigDefs {
		v := d.value(&s.cfg)
		src := kafkaproto.SourceStaticBroker
		if v == d.value(&def) {
			src = kafkaproto.SourceDefault
		}
		out = append(out, kafkaproto.ConfigEntry{Name: d.name, Value: &v, Source: src, ReadOnly: true, Type: d.kind, Doc: d.doc})
	}
	out = append(out, s.logLevelEntry())
	slices.SortFunc(out, func(a, b kafkaproto.ConfigEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *Server) logLevelEntry() kafkaproto.ConfigEntry {
	e := kafkaproto.ConfigEntry{Name: logLevelConfig, Type: 2, Source: kafkaproto.SourceStaticBroker,
		ReadOnly: s.cfg.LogLevel == nil, Doc: "--log-level: debug, info, warn or error; dynamic (this process only)"}
	v := "info"
	if s.cfg.LogLevel != nil {
		v = strings.ToLower(s.cfg.LogLevel.Level().String())
	}
	s.dynamic.mu.Lock()
	if s.dynamic.logLevel != nil {
		e.Source = kafkaproto.SourceDynamicBroker
	}
	s.dynamic.mu.Unlock()
	if e.Source == kafkaproto.SourceStaticBroker && s.dynamic.startLevel == slog.LevelInfo {
		e.Source = kafkaproto.SourceDefault
	}
	e.Value = &v
	return e
}

// alterBrokerConfigs applies ops to this broker's configs: log.level only.
func (s *Server) alterBrokerConfigs(ops []kafkaproto.ConfigOp, validateOnly bool) error {
	var level *slog.Level
	reset := false
	for _, op := range ops {
		if op.Name != logLevelConfig {
			return s.refuseBrokerConfig(op.Name)
		}
		if s.cfg.LogLevel == nil {
			return fmt.Errorf("%w: %s cannot be changed: this process was started without an adjustable logger", kafkaproto.ErrInvalidConfig, op.Name)
		}
		switch op.Op {
		case kafkaproto.OpSet:
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(*op.Value)); err != nil {
				return fmt.Errorf("%w: %s=%q: want debug, info, warn or error", kafkaproto.ErrInvalidConfig, op.Name, *op.Value)
			}
			level, reset = &lv, false
		case kafkaproto.OpDelete:
			level, reset = nil, true
		default:
			return fmt.Errorf("%w: %s is not a list", kafkaproto.ErrInvalidConfig, op.Name)
		}
	}
	if validateOnly || (level == nil && !reset) {
		return nil
	}
	s.dynamic.mu.Lock()
	defer s.dynamic.mu.Unlock()
	if reset {
		s.dynamic.logLevel = nil
		s.cfg.LogLevel.Set(s.dynamic.startLevel)
	} else {
		txt := strings.ToLower(level.String())
		s.dynamic.logLevel = &txt
		s.cfg.LogLevel.Set(*level)
	}
	s.logger.Info("broker config changed", "config", logLevelConfig, "level", s.cfg.LogLevel.Level())
	return nil
}

// refuseBrokerConfig says why a broker config cannot be altered.
func (s *Server) refuseBrokerConfig(name string) error {
	if slices.ContainsFunc(brokerConfigDefs, func(d brokerConfigDef) bool { return d.name == name }) {
		return fmt.Errorf("%w: cannot update these configs dynamically: %s (read-only: a serve flag)", kafkaproto.ErrInvalidConfig, name)
	}
	return fmt.Errorf("%w: unknown broker config %q", kafkaproto.ErrInvalidConfig, name)
}

// rootLogger is the one logger a BROKER_LOGGER resource lists: runnel has
// a single logger, whose level is log.level.
const rootLogger = "root"

// kafkaLevels are Kafka's (log4j's) level names and the slog levels they
// stand for; TRACE, FATAL and OFF sit below and above slog's four.
type kafkaLevel struct {
	name  string
	level slog.Level
}

var kafkaLevels = []kafkaLevel{
	{"TRACE", slog.LevelDebug - 4},
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", slog.LevelError + 4},
	{"OFF", slog.LevelError + 8},
}

// kafkaLevelName is the Kafka name of the highest level at or below lv.
func kafkaLevelName(lv slog.Level) string {
	name := kafkaLevels[0].name
	for _, l := range kafkaLevels {
		if lv >= l.level {
			name = l.name
		}
	}
	return name
}

// brokerLoggers describes the BROKER_LOGGER resource of this node.
func (s *Server) brokerLoggers() []kafkaproto.ConfigEntry {
	lv := s.dynamic.startLevel
	if s.cfg.LogLevel != nil {
		lv = s.cfg.LogLevel.Level()
	}
	v := kafkaLevelName(lv)
	return []kafkaproto.ConfigEntry{{Name: rootLogger, Value: &v, Source: kafkaproto.SourceBrokerLogger,
		ReadOnly: s.cfg.LogLevel == nil, Type: 2, Doc: "the node's log level (log.level)"}}
}

// alterBrokerLoggers sets the root logger's level: log.level by its
// Kafka name. DELETE goes back to --log-level.
func (s *Server) alterBrokerLoggers(ops []kafkaproto.ConfigOp, validateOnly bool) error {
	mapped := make([]kafkaproto.ConfigOp, 0, len(ops))
	for _, op := range ops {
		if op.Name != rootLogger {
			return fmt.Errorf("%w: logger %q does not exist (runnel has one: %s)", kafkaproto.ErrInvalidConfig, op.Name, rootLogger)
		}
		m := kafkaproto.ConfigOp{Name: logLevelConfig, Op: op.Op}
		if op.Op == kafkaproto.OpSet {
			i := slices.IndexFunc(kafkaLevels, func(l kafkaLevel) bool { return strings.EqualFold(l.name, *op.Value) })
			if i < 0 {
				return fmt.Errorf("%w: %s=%q: want TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF", kafkaproto.ErrInvalidConfig, op.Name, *op.Value)
			}
			txt := kafkaLevels[i].level.String()
			m.Value = &txt
		}
		mapped = append(mapped, m)
	}
	return s.alterBrokerConfigs(mapped, validateOnly)
}
