package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

var ErrInvalid = errors.New("invalid topic config")

// Def is one topic config runnel understands.
type Def struct {
	Name  string
	Def   string // default value as Kafka prints it
	Kind  int8   // Kafka ConfigType: 2 STRING, 3 INT, 5 LONG, 7 LIST
	Min   int64
	Check func(string) error // extra check for strings
	// Allowed describes the values check accepts (README's topic config
	// table, readme_kafka_test.go); integers are described by min.
	Allowed string
	Doc     string
	// NotApplied, when set, says why runnel accepts the config but does
	// not act on it (kafka.go); it is described read-only.
	NotApplied string
}

// Defs is every topic config runnel accepts, sorted by name:
// the ones it honours and the rest of Kafka's set.
func Defs() []Def { return slices.Clone(sortedDefs()) }

// sortedDefs is the table, sorted once: Lookup runs for
// every hosted partition a reconcile applies (a million at a restart), and
// building and sorting it each time was most of that work.
var sortedDefs = sync.OnceValue(func() []Def {
	defs := append(honouredTopicConfigs(), kafkaOnlyTopicConfigs()...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs
})

// honouredTopicConfigs are the topic configs runnel acts on.
func honouredTopicConfigs() []Def {
	maxLong := strconv.FormatInt(math.MaxInt64, 10)
	return []Def{
		{Name: "cleanup.policy", Allowed: "delete, compact or compact,delete", Def: "delete", Kind: 7, Check: checkCleanupPolicy, Doc: "delete, compact, or compact,delete"},
		{Name: "delete.retention.ms", Def: strconv.Itoa(segments.DefaultDeleteRetentionMs), Kind: 5, Min: 0, Doc: "how long tombstones survive compaction"},
		{Name: "flush.messages", Def: maxLong, Kind: 5, Min: 1, Doc: "fsync after this many messages; 1 fsyncs before every acknowledgement"},
		{Name: "flush.ms", Def: maxLong, Kind: 5, Min: 0, Doc: "fsync when the oldest unflushed message is this old"},
		{Name: "index.interval.bytes", Def: strconv.Itoa(segments.DefaultIndexIntervalBytes), Kind: 3, Min: 0, Doc: "bytes between offset index entries"},
		{Name: "max.message.bytes", Def: strconv.Itoa(segments.DefaultMaxMessageBytes), Kind: 3, Min: 0, Doc: "largest record batch accepted"},
		{Name: "message.timestamp.type", Allowed: "CreateTime or LogAppendTime", Def: "CreateTime", Kind: 2, Check: checkTimestampType, Doc: "CreateTime or LogAppendTime"},
		{Name: "min.insync.replicas", Def: "1", Kind: 3, Min: 1, Doc: "replicas that must hold a write for acks=all"},
		{Name: "retention.bytes", Def: "-1", Kind: 5, Min: -1, Doc: "bytes kept per partition; -1 unlimited"},
		{Name: "retention.ms", Def: strconv.Itoa(segments.DefaultRetentionMs), Kind: 5, Min: -1, Doc: "how long records are kept; -1 forever"},
		{Name: "segment.bytes", Def: strconv.Itoa(segments.DefaultSegmentBytes), Kind: 3, Min: 14, Doc: "segment file size that triggers a roll (at least 14, Kafka's bound: a batch larger than it gets a segment of its own)"},
		{Name: "segment.ms", Def: strconv.Itoa(segments.DefaultSegmentMs), Kind: 5, Min: 1, Doc: "segment age that triggers a roll"},
		{Name: "unclean.leader.election.enable", Allowed: "true or false", Def: "false", Kind: 1, Check: checkBool, Doc: "allow an out-of-sync replica to become leader"},
	}
}

func Lookup(name string) (Def, bool) {
	defs := sortedDefs()
	i := sort.Search(len(defs), func(i int) bool { return defs[i].Name >= name })
	if i < len(defs) && defs[i].Name == name {
		return defs[i], true
	}
	return Def{}, false
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

// Validate checks one name=value pair.
func Validate(name, value string) error {
	def, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w: unknown config %q", ErrInvalid, name)
	}
	if def.Check != nil {
		if err := def.Check(value); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
		return nil
	}
	bits := 64
	if def.Kind == 3 {
		bits = 32
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, bits)
	if err != nil {
		return fmt.Errorf("%w: %s: %q is not an integer", ErrInvalid, name, value)
	}
	if n < def.Min {
		return fmt.Errorf("%w: %s: %d is below the minimum %d", ErrInvalid, name, n, def.Min)
	}
	return nil
}

func ValidateAll(cfgs map[string]string) error {
	for k, v := range cfgs {
		if err := Validate(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Effective returns name's value for a topic: its own or the default.
func Effective(cfgs map[string]string, name string) string {
	if v, ok := cfgs[name]; ok {
		return v
	}
	def, _ := Lookup(name)
	return def.Def
}

func Int(cfgs map[string]string, name string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(Effective(cfgs, name)), 10, 64)
	return n
}

// LogConfig turns validated topic configs into a segments.Config.
func LogConfig(cfgs map[string]string) segments.Config {
	c := segments.DefaultConfig()
	// Kafka lets segment.bytes go down to 14; no RecordBatch v2 is
	// smaller than its 61-byte header, so any value up to 61 rolls after
	// every batch, which is what 61 does (segments refuses less).
	c.SegmentBytes = max(Int(cfgs, "segment.bytes"), recordbatch.HeaderLen) // the smallest batch there is
	c.SegmentMs = Int(cfgs, "segment.ms")
	c.RetentionMs = Int(cfgs, "retention.ms")
	c.RetentionBytes = Int(cfgs, "retention.bytes")
	c.CleanupPolicy = Effective(cfgs, "cleanup.policy")
	c.MaxMessageBytes = int32(Int(cfgs, "max.message.bytes"))
	c.IndexIntervalBytes = int32(Int(cfgs, "index.interval.bytes"))
	c.FlushMessages = Int(cfgs, "flush.messages")
	c.FlushMs = Int(cfgs, "flush.ms")
	c.DeleteRetentionMs = Int(cfgs, "delete.retention.ms")
	return c
}
