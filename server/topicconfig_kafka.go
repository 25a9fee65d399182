package server

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/runnel/runnel/kafkaproto"
)

// The rest of Kafka's topic config set. Tools that manage topics (Strimzi,
// Terraform providers, kafka-configs.sh, Cruise Control) set these, so they
// are accepted with Kafka's types and bounds, stored and described, but
// runnel does not act on them: DescribeConfigs reports them read-only with
// the reason in their documentation (notApplied). The bounds are Kafka's
// (LogConfig, 3.x); a value out of them is INVALID_CONFIG as in Kafka.
func kafkaOnlyTopicConfigs() []topicConfigDef {
	maxLong := strconv.FormatInt(math.MaxInt64, 10)
	return []topicConfigDef{
		{name: "compression.type", allowed: "uncompressed, zstd, lz4, snappy, gzip or producer", def: "producer", kind: 2, check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
			notApplied: "batches are stored as the producer compressed them (producer)"},
		{name: "compression.gzip.level", allowed: "1 to 9, or -1", def: "-1", kind: 3, check: intIn(1, 9, -1), notApplied: "runnel does not recompress"},
		{name: "compression.lz4.level", allowed: "1 to 17", def: "9", kind: 3, check: intIn(1, 17), notApplied: "runnel does not recompress"},
		{name: "compression.zstd.level", allowed: "-131072 to 22", def: "3", kind: 3, check: intIn(-131072, 22), notApplied: "runnel does not recompress"},
		{name: "file.delete.delay.ms", def: "60000", kind: 5, min: 0, notApplied: "segments are deleted at once"},
		{name: "follower.replication.throttled.replicas", allowed: "* or partition:broker,...", def: "", kind: 7, check: checkThrottledReplicas, notApplied: "replication is not throttled"},
		{name: "leader.replication.throttled.replicas", allowed: "* or partition:broker,...", def: "", kind: 7, check: checkThrottledReplicas, notApplied: "replication is not throttled"},
		{name: "local.retention.bytes", def: "-2", kind: 5, min: -2, notApplied: "no tiered storage"},
		{name: "local.retention.ms", def: "-2", kind: 5, min: -2, notApplied: "no tiered storage"},
		{name: "max.compaction.lag.ms", def: maxLong, kind: 5, min: 1, notApplied: "compaction runs on the maintenance interval"},
		{name: "message.downconversion.enable", allowed: "true or false", def: "true", kind: 1, check: checkBool, notApplied: "Fetch below v4 is not served, so nothing is down-converted"},
		{name: "message.format.version", allowed: "a Kafka version (0.8.0 to 3.x, optional -IVn)", def: "3.0-IV1", kind: 2, check: checkFormatVersion, notApplied: "records are always RecordBatch v2"},
		{name: "message.timestamp.after.max.ms", def: maxLong, kind: 5, min: 0, notApplied: "record timestamps are not bounded"},
		{name: "message.timestamp.before.max.ms", def: maxLong, kind: 5, min: 0, notApplied: "record timestamps are not bounded"},
		{name: "message.timestamp.difference.max.ms", def: maxLong, kind: 5, min: 0, notApplied: "record timestamps are not bounded"},
		{name: "min.cleanable.dirty.ratio", allowed: "0 to 1", def: "0.5", kind: 6, check: checkRatio, notApplied: "compaction runs on the maintenance interval"},
		{name: "min.compaction.lag.ms", def: "0", kind: 5, min: 0, notApplied: "compaction runs on the maintenance interval"},
		{name: "preallocate", allowed: "true or false", def: "false", kind: 1, check: checkBool, notApplied: "segment files grow as written"},
		{name: "remote.storage.enable", allowed: "false", def: "false", kind: 1, check: oneOf("false"), notApplied: "no tiered storage (only false is accepted)"},
		{name: "segment.index.bytes", def: "10485760", kind: 3, min: 4, notApplied: "index files grow as written"},
		{name: "segment.jitter.ms", def: "0", kind: 5, min: 0, notApplied: "segments roll at segment.ms exactly"},
	}
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		for _, ok := range values {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
	}
}

// intIn accepts an integer in [lo, hi] or one of also.
func intIn(lo, hi int64, also ...int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		for _, a := range also {
			if n == a {
				return nil
			}
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is not in [%d, %d]", n, lo, hi)
		}
		return nil
	}
}

func checkRatio(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("%q is not a number in [0, 1]", v)
	}
	return nil
}

// throttledReplicas is Kafka's format: "*" or partition:broker pairs.
var throttledReplicas = regexp.MustCompile(`^(\*|([0-9]+:[0-9]+)?(,[0-9]+:[0-9]+)*)$`)

func checkThrottledReplicas(v string) error {
	if !throttledReplicas.MatchString(strings.ReplaceAll(v, " ", "")) {
		return fmt.Errorf("%q is not * or a list of partition:broker", v)
	}
	return nil
}

// formatVersion is a Kafka version as message.format.version takes it
// (0.8.0 to 3.x, optionally with an -IVn suffix).
var formatVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?$`)

func checkFormatVersion(v string) error {
	if !formatVersion.MatchString(v) {
		return fmt.Errorf("%q is not a Kafka version", v)
	}
	return nil
}

// brokerSynonyms names the broker config (brokerconfig.go) that gives a
// topic config its default, as Kafka names them.
var brokerSynonyms = map[string]string{
	"segment.bytes":                  "log.segment.bytes",
	"segment.ms":                     "log.roll.ms",
	"retention.ms":                   "log.retention.ms",
	"retention.bytes":                "log.retention.bytes",
	"cleanup.policy":                 "log.cleanup.policy",
	"max.message.bytes":              "message.max.bytes",
	"min.insync.replicas":            "min.insync.replicas",
	"unclean.leader.election.enable": "unclean.leader.election.enable",
}

// topicConfigSynonyms lists where a topic config's value comes from, most
// specific first: the topic's own value when it sets one, then the
// broker-wide default (under the broker config's name when there is one).
func topicConfigSynonyms(def topicConfigDef, cfgs map[string]string) []kafkaproto.ConfigSynonym {
	var out []kafkaproto.ConfigSynonym
	if v, ok := cfgs[def.name]; ok {
		out = append(out, kafkaproto.ConfigSynonym{Name: def.name, Value: &v, Source: kafkaproto.SourceTopic})
	}
	name := def.name
	if b, ok := brokerSynonyms[def.name]; ok {
		name = b
	}
	d := def.def
	return append(out, kafkaproto.ConfigSynonym{Name: name, Value: &d, Source: kafkaproto.SourceDefault})
}
