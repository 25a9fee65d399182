package topicconfig

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
// the reason in their documentation (NotApplied). The bounds are Kafka's
// (LogConfig, 3.x); a value out of them is INVALID_CONFIG as in Kafka.
func kafkaOnlyTopicConfigs() []Def {
	maxLong := strconv.FormatInt(math.MaxInt64, 10)
	return []Def{
		{Name: "compression.type", Allowed: "uncompressed, zstd, lz4, snappy, gzip or producer", Def: "producer", Kind: 2, Check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
			NotApplied: "batches are stored as the producer compressed them (producer)"},
		{Name: "compression.gzip.level", Allowed: "1 to 9, or -1", Def: "-1", Kind: 3, Check: intIn(1, 9, -1), NotApplied: "runnel does not recompress"},
		{Name: "compression.lz4.level", Allowed: "1 to 17", Def: "9", Kind: 3, Check: intIn(1, 17), NotApplied: "runnel does not recompress"},
		{Name: "compression.zstd.level", Allowed: "-131072 to 22", Def: "3", Kind: 3, Check: intIn(-131072, 22), NotApplied: "runnel does not recompress"},
		{Name: "file.delete.delay.ms", Def: "60000", Kind: 5, Min: 0, NotApplied: "segments are deleted at once"},
		{Name: "follower.replication.throttled.replicas", Allowed: "* or partition:broker,...", Def: "", Kind: 7, Check: checkThrottledReplicas, NotApplied: "replication is not throttled"},
		{Name: "leader.replication.throttled.replicas", Allowed: "* or partition:broker,...", Def: "", Kind: 7, Check: checkThrottledReplicas, NotApplied: "replication is not throttled"},
		{Name: "local.retention.bytes", Def: "-2", Kind: 5, Min: -2, NotApplied: "no tiered storage"},
		{Name: "local.retention.ms", Def: "-2", Kind: 5, Min: -2, NotApplied: "no tiered storage"},
		{Name: "max.compaction.lag.ms", Def: maxLong, Kind: 5, Min: 1, NotApplied: "compaction runs on the maintenance interval"},
		{Name: "message.downconversion.enable", Allowed: "true or false", Def: "true", Kind: 1, Check: checkBool, NotApplied: "Fetch below v4 is not served, so nothing is down-converted"},
		{Name: "message.format.version", Allowed: "a Kafka version (0.8.0 to 3.x, optional -IVn)", Def: "3.0-IV1", Kind: 2, Check: checkFormatVersion, NotApplied: "records are always RecordBatch v2"},
		{Name: "message.timestamp.after.max.ms", Def: maxLong, Kind: 5, Min: 0, NotApplied: "record timestamps are not bounded"},
		{Name: "message.timestamp.before.max.ms", Def: maxLong, Kind: 5, Min: 0, NotApplied: "record timestamps are not bounded"},
		{Name: "message.timestamp.difference.max.ms", Def: maxLong, Kind: 5, Min: 0, NotApplied: "record timestamps are not bounded"},
		{Name: "min.cleanable.dirty.ratio", Allowed: "0 to 1", Def: "0.5", Kind: 6, Check: checkRatio, NotApplied: "compaction runs on the maintenance interval"},
		{Name: "min.compaction.lag.ms", Def: "0", Kind: 5, Min: 0, NotApplied: "compaction runs on the maintenance interval"},
		{Name: "preallocate", Allowed: "true or false", Def: "false", Kind: 1, Check: checkBool, NotApplied: "segment files grow as written"},
		{Name: "remote.storage.enable", Allowed: "false", Def: "false", Kind: 1, Check: oneOf("false"), NotApplied: "no tiered storage (only false is accepted)"},
		{Name: "segment.index.bytes", Def: "10485760", Kind: 3, Min: 4, NotApplied: "index files grow as written"},
		{Name: "segment.jitter.ms", Def: "0", Kind: 5, Min: 0, NotApplied: "segments roll at segment.ms exactly"},
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

// brokerSynonyms names the broker config (server/brokerconfig.go) that gives a
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

// Synonyms lists where a topic config's value comes from, most
// specific first: the topic's own value when it sets one, then the
// broker-wide default (under the broker config's name when there is one).
func Synonyms(def Def, cfgs map[string]string) []kafkaproto.ConfigSynonym {
	var out []kafkaproto.ConfigSynonym
	if v, ok := cfgs[def.Name]; ok {
		out = append(out, kafkaproto.ConfigSynonym{Name: def.Name, Value: &v, Source: kafkaproto.SourceTopic})
	}
	name := def.Name
	if b, ok := brokerSynonyms[def.Name]; ok {
		name = b
	}
	d := def.Def
	return append(out, kafkaproto.ConfigSynonym{Name: name, Value: &d, Source: kafkaproto.SourceDefault})
}
