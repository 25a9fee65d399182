package kafkadoor

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/runnel/runnel/kafkaproto"
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

// StaticConfig is one read-only broker config: a serve flag with a Kafka
// name, its value, whether that is the flag's default, and its Kafka
// ConfigType (1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 7 LIST).
type StaticConfig struct {
	Name    string
	Kind    int8
	Value   string
	Default bool
	Doc     string
}

// dynamicConfigs holds the dynamic broker configs set at run time.
type dynamicConfigs struct {
	mu       sync.Mutex
	logLevel *string // set by an admin; nil: the flag's; guarded by mu
	// startLevel is --log-level, what deleting log.level goes back to.
	// Set in New, read-only after.
	startLevel slog.Level
}

// brokerConfigs describes this node's broker configs, sorted by name.
func (k *Backend) brokerConfigs() []kafkaproto.ConfigEntry {
	out := make([]kafkaproto.ConfigEntry, 0, len(k.cfg.BrokerConfigs)+1)
	for _, d := range k.cfg.BrokerConfigs {
		v := d.Value
		src := kafkaproto.SourceStaticBroker
		if d.Default {
			src = kafkaproto.SourceDefault
		}
		out = append(out, kafkaproto.ConfigEntry{Name: d.Name, Value: &v, Source: src, ReadOnly: true, Type: d.Kind, Doc: d.Doc})
	}
	out = append(out, k.logLevelEntry())
	slices.SortFunc(out, func(a, b kafkaproto.ConfigEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (k *Backend) logLevelEntry() kafkaproto.ConfigEntry {
	e := kafkaproto.ConfigEntry{Name: logLevelConfig, Type: 2, Source: kafkaproto.SourceStaticBroker,
		ReadOnly: k.cfg.LogLevel == nil, Doc: "--log-level: debug, info, warn or error; dynamic (this process only)"}
	v := "info"
	if k.cfg.LogLevel != nil {
		v = strings.ToLower(k.cfg.LogLevel.Level().String())
	}
	k.dynamic.mu.Lock()
	if k.dynamic.logLevel != nil {
		e.Source = kafkaproto.SourceDynamicBroker
	}
	k.dynamic.mu.Unlock()
	if e.Source == kafkaproto.SourceStaticBroker && k.dynamic.startLevel == slog.LevelInfo {
		e.Source = kafkaproto.SourceDefault
	}
	e.Value = &v
	return e
}

// alterBrokerConfigs applies ops to this broker's configs: log.level only.
func (k *Backend) alterBrokerConfigs(ops []kafkaproto.ConfigOp, validateOnly bool) error {
	var level *slog.Level
	reset := false
	for _, op := range ops {
		if op.Name != logLevelConfig {
			return k.refuseBrokerConfig(op.Name)
		}
		if k.cfg.LogLevel == nil {
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
	k.dynamic.mu.Lock()
	defer k.dynamic.mu.Unlock()
	if reset {
		k.dynamic.logLevel = nil
		k.cfg.LogLevel.Set(k.dynamic.startLevel)
	} else {
		txt := strings.ToLower(level.String())
		k.dynamic.logLevel = &txt
		k.cfg.LogLevel.Set(*level)
	}
	k.cfg.Logger.Info("broker config changed", "config", logLevelConfig, "level", k.cfg.LogLevel.Level())
	return nil
}

// refuseBrokerConfig says why a broker config cannot be altered.
func (k *Backend) refuseBrokerConfig(name string) error {
	if slices.ContainsFunc(k.cfg.BrokerConfigs, func(d StaticConfig) bool { return d.Name == name }) {
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
func (k *Backend) brokerLoggers() []kafkaproto.ConfigEntry {
	lv := k.dynamic.startLevel
	if k.cfg.LogLevel != nil {
		lv = k.cfg.LogLevel.Level()
	}
	v := kafkaLevelName(lv)
	return []kafkaproto.ConfigEntry{{Name: rootLogger, Value: &v, Source: kafkaproto.SourceBrokerLogger,
		ReadOnly: k.cfg.LogLevel == nil, Type: 2, Doc: "the node's log level (log.level)"}}
}

// alterBrokerLoggers sets the root logger's level: log.level by its
// Kafka name. DELETE goes back to --log-level.
func (k *Backend) alterBrokerLoggers(ops []kafkaproto.ConfigOp, validateOnly bool) error {
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
	return k.alterBrokerConfigs(mapped, validateOnly)
}
