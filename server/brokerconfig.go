package server

import (
	"strconv"
	"strings"
	"time"

	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker/topicconfig"
	"github.com/runnel/runnel/server/kafkadoor"
)

// Broker configs as Kafka clients see them (DescribeConfigs on a BROKER
// resource; kafkadoor/brokerconfig.go serves them and the one dynamic
// config, log.level): the `runnel serve` flags that have a Kafka
// counterpart, named as Kafka names them.

// brokerConfigs is this node's read-only broker configs, each marked
// default when its value is the flag's default.
func brokerConfigs(c *Config) []kafkadoor.StaticConfig {
	def := DefaultConfig()
	out := make([]kafkadoor.StaticConfig, 0, len(brokerConfigDefs))
	for _, d := range brokerConfigDefs {
		v := d.value(c)
		out = append(out, kafkadoor.StaticConfig{Name: d.name, Kind: d.kind, Value: v, Default: v == d.value(&def), Doc: d.doc})
	}
	return out
}

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
	return func(*Config) string { return topicconfig.Effective(nil, name) }
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
