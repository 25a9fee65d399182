package server

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/runnel/runnel/segments"
)

var errInvalidConfig = errors.New("invalid topic config")

// recordBatchHeaderBytes is the size of a RecordBatch v2 header, the
// smallest batch there is.
const recordBatchHeaderBytes = 61

// topicConfigDef is one topic config runnel understands.
type topicConfigDef struct {
	name  string
	def   string // default value as Kafka prints it
	kind  int8   // Kafka ConfigType: 2 STRING, 3 INT, 5 LONG, 7 LIST
	min   int64
	check func(string) error // extra check for strings
	// allowed describes the values check accepts (README's topic config
	// table, readme_kafka_test.go); integers are described by min.
	allowed string
	doc     string
	// notApplied, when set, says why runnel accepts the config but does
	// not act on it (topicconfig_kafka.go); it is described read-only.
	notApplied string
}

// topicConfigDefs is every topic config runnel accepts, sorted by name:
// the ones it honours and the rest of Kafka's set.
func topicConfigDefs() []topicConfigDef {
	defs := append(honouredTopicConfigs(), kafkaOnlyTopicConfigs()...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].name < defs[j].name })
	return defs
}

// honouredTopicConfigs are the topic configs runnel acts on.
func honouredTopicConfigs() []topicConfigDef {
	maxLong := strconv.FormatInt(math.MaxInt64, 10)
	return []topicConfigDef{
		{name: "cleanup.policy", allowed: "delete, compact or compact,delete", def: "delete", kind: 7, check: checkCleanupPolicy, doc: "delete, compact, or compact,delete"},
		{name: "delete.retention.ms", def: strconv.Itoa(segments.DefaultDeleteRetentionMs), kind: 5, min: 0, doc: "how long tombstones survive compaction"},
		{name: "flush.messages", def: maxLong, kind: 5, min: 1, doc: "fsync after this many messages; 1 fsyncs before every acknowledgement"},
		{name: "flush.ms", def: maxLong, kind: 5, min: 0, doc: "fsync when the oldest unflushed message is this old"},
		{name: "index.interval.bytes", def: strconv.Itoa(segments.DefaultIndexIntervalBytes), kind: 3, min: 0, doc: "bytes between offset index entries"},
		{name: "max.message.bytes", def: strconv.Itoa(segments.DefaultMaxMessageBytes), kind: 3, min: 0, doc: "largest record batch accepted"},
		{name: "message.timestamp.type", allowed: "CreateTime or LogAppendTime", def: "CreateTime", kind: 2, check: checkTimestampType, doc: "CreateTime or LogAppendTime"},
		{name: "min.insync.replicas", def: "1", kind: 3, min: 1, doc: "replicas that must hold a write for acks=all"},
		{name: "retention.bytes", def: "-1", kind: 5, min: -1, doc: "bytes kept per partition; -1 unlimited"},
		{name: "retention.ms", def: strconv.Itoa(segments.DefaultRetentionMs), kind: 5, min: -1, doc: "how long records are kept; -1 forever"},
		{name: "segment.bytes", def: strconv.Itoa(segments.DefaultSegmentBytes), kind: 3, min: 14, doc: "segment file size that triggers a roll (at least 14, Kafka's bound: a batch larger than it gets a segment of its own)"},
		{name: "segment.ms", def: strconv.Itoa(segments.DefaultSegmentMs), kind: 5, min: 1, doc: "segment age that triggers a roll"},
		{name: "unclean.leader.election.enable", allowed: "true or false", def: "false", kind: 1, check: checkBool, doc: "allow an out-of-sync replica to become leader"},
	}
}

func lookupTopicConfig(name string) (topicConfigDef, bool) {
	defs := topicConfigDefs()
	i := sort.Search(len(defs), func(i int) bool { return defs[i].name >= name })
	if i < len(defs) && defs[i].name == name {
		return defs[i], true
	}
	return topicConfigDef{}, false
}

func checkCleanupPolicy(v string) error {
	parts := strings.Split(v, ",")
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return fmt.Errorf("%q is not delete or compact", p)
		}
	}
	return nil
}

func checkTimestampType(v string) error {
	if v != "CreateTime" && v != "LogAppendTime" {
		return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
	}
	return nil
}

func checkBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("%q is not true or false", v)
	}
	return nil
}

// validateTopicConfig checks one name=value pair.
func validateTopicConfig(name, value string) error {
	def, ok := lookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("%w: unknown config %q", errInvalidConfig, name)
	}
	if def.check != nil {
		if err := def.check(value); err != nil {
			return fmt.Errorf("%w: %s: %v", errInvalidConfig, name, err)
		}
		return nil
	}
	bits := 64
	if def.kind == 3 {
		bits = 32
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, bits)
	if err != nil {
		return fmt.Errorf("%w: %s: %q is not an integer", errInvalidConfig, name, value)
	}
	if n < def.min {
		return fmt.Errorf("%w: %s: %d is below the minimum %d", errInvalidConfig, name, n, def.min)
	}
	return nil
}

func validateTopicConfigs(cfgs map[string]string) error {
	for k, v := range cfgs {
		if err := validateTopicConfig(k, v); err != nil {
			return err
		}
	}
	return nil
}

// effectiveConfig returns name's value for a topic: its own or the default.
func effectiveConfig(cfgs map[string]string, name string) string {
	if v, ok := cfgs[name]; ok {
		return v
	}
	def, _ := lookupTopicConfig(name)
	return def.def
}

func configInt(cfgs map[string]string, name string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(effectiveConfig(cfgs, name)), 10, 64)
	return n
}

// logConfig turns validated topic configs into a segments.Config.
func logConfig(cfgs map[string]string) segments.Config {
	c := segments.DefaultConfig()
	// Kafka lets segment.bytes go down to 14; no RecordBatch v2 is
	// smaller than its 61-byte header, so any value up to 61 rolls after
	// every batch, which is what 61 does (segments refuses less).
	c.SegmentBytes = max(configInt(cfgs, "segment.bytes"), recordBatchHeaderBytes)
	c.SegmentMs = configInt(cfgs, "segment.ms")
	c.RetentionMs = configInt(cfgs, "retention.ms")
	c.RetentionBytes = configInt(cfgs, "retention.bytes")
	c.CleanupPolicy = effectiveConfig(cfgs, "cleanup.policy")
	c.MaxMessageBytes = int32(configInt(cfgs, "max.message.bytes"))
	c.IndexIntervalBytes = int32(configInt(cfgs, "index.interval.bytes"))
	c.FlushMessages = configInt(cfgs, "flush.messages")
	c.FlushMs = configInt(cfgs, "flush.ms")
	c.DeleteRetentionMs = configInt(cfgs, "delete.retention.ms")
	return c
}
