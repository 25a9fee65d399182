package kafkadoor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

// listConfigOp checks an IncrementalAlterConfigs APPEND or SUBTRACT on a
// list topic config (cleanup.policy, the throttled replica lists) and
// returns it as the state machine applies it: the values are added to
// (without duplicates) or removed from the topic's value, or the default
// when the topic does not set it, as in Kafka. Any other config is
// INVALID_CONFIG.
func listConfigOp(op kafkaproto.ConfigOp) (raftfsm.ConfigListOp, error) {
	def, ok := topicconfig.Lookup(op.Name)
	if !ok {
		return raftfsm.ConfigListOp{}, fmt.Errorf("%w: unknown config %q", kafkaproto.ErrInvalidConfig, op.Name)
	}
	if def.Kind != 7 {
		return raftfsm.ConfigListOp{}, fmt.Errorf("%w: %s is not a list: APPEND and SUBTRACT are for list configs", kafkaproto.ErrInvalidConfig, op.Name)
	}
	if op.Value == nil {
		return raftfsm.ConfigListOp{}, fmt.Errorf("%w: %s: null value", kafkaproto.ErrInvalidConfig, op.Name)
	}
	lo := raftfsm.ConfigListOp{Name: op.Name, Subtract: op.Op == kafkaproto.OpSubtract, Default: def.Def}
	for _, p := range strings.Split(*op.Value, ",") {
		if p = strings.TrimSpace(p); p != "" {
			lo.Values = append(lo.Values, p)
		}
	}
	// Each value must be one the config takes, so that any list of them is
	// (the state machine cannot run the config's check).
	for _, v := range lo.Values {
		if err := topicconfig.Validate(op.Name, v); err != nil {
			return lo, toKafka(err)
		}
	}
	return lo, nil
}

// topicConfigChanges turns IncrementalAlterConfigs operations on a topic
// into changes and list ops for alterTopicConfigs. Operations on one config
// build on each other in request order: an APPEND or SUBTRACT after a SET
// or DELETE of the same config in the request works on that value here;
// one on the topic's value goes to the state machine (raftfsm.ConfigListOp)
// so that it applies to the value in the log's order, not to this node's
// image, which may lag. A dry run works on the image.
func (k *Backend) topicConfigChanges(ctx context.Context, topic string, ops []kafkaproto.ConfigOp, validateOnly bool) (map[string]*string, []raftfsm.ConfigListOp, error) {
	changes := map[string]*string{}
	var listOps []raftfsm.ConfigListOp
	dropListOps := func(name string) {
		listOps = slices.DeleteFunc(listOps, func(lo raftfsm.ConfigListOp) bool { return lo.Name == name })
	}
	for _, op := range ops {
		switch op.Op {
		case kafkaproto.OpSet:
			if op.Value == nil {
				return nil, nil, fmt.Errorf("%w: %s: null value", kafkaproto.ErrInvalidConfig, op.Name)
			}
			changes[op.Name] = op.Value
			dropListOps(op.Name)
			continue
		case kafkaproto.OpDelete:
			changes[op.Name] = nil
			dropListOps(op.Name)
			continue
		}
		lo, err := listConfigOp(op)
		if err != nil {
			return nil, nil, err
		}
		v, changed := changes[op.Name]
		if !changed && !validateOnly {
			listOps = append(listOps, lo)
			continue
		}
		current := lo.Default
		switch {
		case changed && v != nil:
			current = *v
		case !changed:
			_, t, ok := k.cfg.Admin.LookupTopic(ctx, topic)
			if !ok {
				return nil, nil, fmt.Errorf("%w: %s", kafkaproto.ErrUnknownTopicOrPartition, topic)
			}
			current = topicconfig.Effective(t.Configs, op.Name)
		}
		joined := raftfsm.ApplyListOp(current, lo)
		changes[op.Name] = &joined
	}
	return changes, listOps, nil
}
