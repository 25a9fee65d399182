package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/broker"
)

// listConfigOp applies an IncrementalAlterConfigs APPEND or SUBTRACT to a
// list topic config (cleanup.policy, the throttled replica lists): the
// values are added to (without duplicates) or removed from the current
// value, or the default when the topic does not set it, as in Kafka. It
// works on changes, so several operations on one config in one request
// build on each other. Any other config is INVALID_CONFIG.
func (s *Server) listConfigOp(ctx context.Context, topic string, op kafkaproto.ConfigOp, changes map[string]*string) error {
	def, ok := broker.LookupTopicConfig(op.Name)
	if !ok {
		return fmt.Errorf("%w: unknown config %q", kafkaproto.ErrInvalidConfig, op.Name)
	}
	if def.Kind != 7 {
		return fmt.Errorf("%w: %s is not a list: APPEND and SUBTRACT are for list configs", kafkaproto.ErrInvalidConfig, op.Name)
	}
	if op.Value == nil {
		return fmt.Errorf("%w: %s: null value", kafkaproto.ErrInvalidConfig, op.Name)
	}
	var current string
	if v, ok := changes[op.Name]; ok {
		if v != nil {
			current = *v
		} else {
			current = def.Def
		}
	} else {
		_, t, ok := s.admin.LookupTopic(ctx, topic)
		if !ok {
			return fmt.Errorf("%w: %s", kafkaproto.ErrUnknownTopicOrPartition, topic)
		}
		current = broker.EffectiveConfig(t.Configs, op.Name)
	}
	values := splitList(current)
	for _, v := range splitList(*op.Value) {
		switch op.Op {
		case kafkaproto.OpAppend:
			if !slices.Contains(values, v) {
				values = append(values, v)
			}
		case kafkaproto.OpSubtract:
			values = slices.DeleteFunc(values, func(have string) bool { return have == v })
		}
	}
	joined := strings.Join(values, ",")
	changes[op.Name] = &joined
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
