package kafkadoor

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
)

// The broker configs in-process: the static ones as given, log.level
// dynamic (set, validate-only, delete back to the flag) and reachable as
// the BROKER_LOGGER "root" logger under Kafka's level names.
func TestBrokerConfigsAndLogLevel(t *testing.T) {
	var lv slog.LevelVar
	k := New(Config{NodeID: 3, LogLevel: &lv, Logger: slog.New(slog.DiscardHandler), BrokerConfigs: []StaticConfig{
		{Name: "replica.lag.time.max.ms", Kind: 5, Value: "7000"},
		{Name: "broker.rack", Kind: 2, Value: "", Default: true},
	}})
	ctx := context.Background()
	broker := kafkaproto.ConfigResource{Type: kafkaproto.ResourceBroker, Name: "3"}
	logger := kafkaproto.ConfigResource{Type: kafkaproto.ResourceBrokerLogger, Name: "3"}
	get := func(res kafkaproto.ConfigResource, name string) kafkaproto.ConfigEntry {
		t.Helper()
		es, err := k.DescribeConfigs(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("no %s in %+v", name, es)
		return kafkaproto.ConfigEntry{}
	}
	set := func(res kafkaproto.ConfigResource, name string, op kafkaproto.ConfigOpType, v string, validateOnly bool) error {
		o := kafkaproto.ConfigOp{Name: name, Op: op}
		if op == kafkaproto.OpSet {
			o.Value = &v
		}
		return k.AlterConfigs(ctx, res, []kafkaproto.ConfigOp{o}, validateOnly)
	}
	if e := get(broker, "replica.lag.time.max.ms"); *e.Value != "7000" || e.Source != kafkaproto.SourceStaticBroker || !e.ReadOnly {
		t.Fatalf("replica.lag.time.max.ms: %+v", e)
	}
	if e := get(broker, "broker.rack"); e.Source != kafkaproto.SourceDefault {
		t.Fatalf("broker.rack: %+v", e)
	}
	if e := get(broker, "log.level"); *e.Value != "info" || e.Source != kafkaproto.SourceDefault || e.ReadOnly {
		t.Fatalf("log.level at start: %+v", e)
	}
	if err := set(broker, "log.level", kafkaproto.OpSet, "debug", true); err != nil || lv.Level() != slog.LevelInfo {
		t.Fatalf("validate-only set: %v, level %v", err, lv.Level())
	}
	if err := set(broker, "log.level", kafkaproto.OpSet, "debug", false); err != nil || lv.Level() != slog.LevelDebug {
		t.Fatalf("set: %v, level %v", err, lv.Level())
	}
	if e := get(broker, "log.level"); *e.Value != "debug" || e.Source != kafkaproto.SourceDynamicBroker {
		t.Fatalf("log.level after set: %+v", e)
	}
	if e := get(logger, "root"); *e.Value != "DEBUG" || e.Source != kafkaproto.SourceBrokerLogger {
		t.Fatalf("root logger: %+v", e)
	}
	if err := set(logger, "root", kafkaproto.OpSet, "error", false); err != nil || lv.Level() != slog.LevelError {
		t.Fatalf("set root logger: %v, level %v", err, lv.Level())
	}
	if err := set(broker, "log.level", kafkaproto.OpDelete, "", false); err != nil || lv.Level() != slog.LevelInfo {
		t.Fatalf("delete: %v, level %v", err, lv.Level())
	}
	if e := get(broker, "log.level"); e.Source != kafkaproto.SourceDefault {
		t.Fatalf("log.level after delete: %+v", e)
	}
	for _, c := range []struct {
		res     kafkaproto.ConfigResource
		name, v string
		want    error
	}{
		{broker, "replica.lag.time.max.ms", "1000", kafkaproto.ErrInvalidConfig},
		{broker, "no.such.config", "1", kafkaproto.ErrInvalidConfig},
		{broker, "log.level", "loud", kafkaproto.ErrInvalidConfig},
		{logger, "kafka.server", "INFO", kafkaproto.ErrInvalidConfig},
		{kafkaproto.ConfigResource{Type: kafkaproto.ResourceBroker, Name: "2"}, "log.level", "info", kafkaproto.ErrInvalidRequest},
	} {
		if err := set(c.res, c.name, kafkaproto.OpSet, c.v, false); !errors.Is(err, c.want) {
			t.Errorf("set %s=%s on %+v: %v, want %v", c.name, c.v, c.res, err, c.want)
		}
	}
}
