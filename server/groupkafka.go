package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel/kafkaproto"
)

var _ kafkaproto.GroupCoordinator = (*kafkaBackend)(nil)

func jsonValue(v any) ([]byte, error) { return json.Marshal(v) }

// coordinator returns the node's coordinator (nil on a controller-only
// node, which the listener never serves).
func (k *kafkaBackend) groups() (*groupCoordinator, error) {
	if k.s.groups == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.s.groups, nil
}

// group finds a group this broker coordinates; create makes it.
func (k *kafkaBackend) group(ctx context.Context, name string, create bool) (*group, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	g, err := c.lookup(ctx, name, create)
	if err != nil {
		return nil, toKafkaError(err)
	}
	return g, nil
}

func (k *kafkaBackend) GroupCoordinatorID(ctx context.Context, group string) (int32, error) {
	c, err := k.groups()
	if err != nil {
		return -1, err
	}
	leader, _, err := c.coordinatorOf(ctx, group, true)
	if err != nil {
		return -1, toKafkaError(err)
	}
	if leader < 0 {
		return -1, fmt.Errorf("%w: offsets partition of %s has no leader", kafkaproto.ErrCoordinatorNotAvailable, group)
	}
	return leader, nil
}

func (k *kafkaBackend) JoinGroup(ctx context.Context, req kafkaproto.JoinRequest) (kafkaproto.JoinResult, error) {
	g, err := k.group(ctx, req.Group, true)
	if err != nil {
		return kafkaproto.JoinResult{MemberID: req.MemberID}, err
	}
	return g.join(ctx, req, nil)
}

func (k *kafkaBackend) SyncGroup(ctx context.Context, req kafkaproto.SyncRequest) (kafkaproto.SyncResult, error) {
	g, err := k.group(ctx, req.Group, false)
	if err != nil {
		return kafkaproto.SyncResult{}, err
	}
	if g == nil {
		return kafkaproto.SyncResult{}, fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, req.Group)
	}
	return g.sync(ctx, req)
}

func (k *kafkaBackend) Heartbeat(ctx context.Context, m kafkaproto.MemberRef) error {
	g, err := k.group(ctx, m.Group, false)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, m.Group)
	}
	return g.heartbeat(m)
}

func (k *kafkaBackend) LeaveGroup(ctx context.Context, group string, members []kafkaproto.MemberRef) ([]error, error) {
	g, err := k.group(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, group)
	}
	return g.leave(members), nil
}

func (k *kafkaBackend) CommitOffsets(ctx context.Context, m kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	g, err := k.group(ctx, m.Group, true)
	if err != nil {
		return nil, err
	}
	errs, err := g.commit(m, offsets)
	return errs, toKafkaError(err)
}

func (k *kafkaBackend) FetchOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]kafkaproto.CommittedOffset, error) {
	g, err := k.group(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		g = newGroup(k.s.groups, group, -1) // nothing committed: every offset -1
	}
	return g.fetchOffsets(parts), nil
}

func (k *kafkaBackend) DeleteOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]error, error) {
	g, err := k.group(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: %s", kafkaproto.ErrGroupIDNotFound, group)
	}
	errs, err := g.deleteOffsets(parts)
	return errs, toKafkaError(err)
}

func (k *kafkaBackend) ListGroups(ctx context.Context) ([]kafkaproto.GroupListing, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	var out []kafkaproto.GroupListing
	for _, g := range c.snapshot() {
		g.mu.Lock()
		if g.state != stateDead {
			out = append(out, kafkaproto.GroupListing{Group: g.name, ProtocolType: g.protocolType, State: string(g.state)})
		}
		g.mu.Unlock()
	}
	return out, nil
}

func (k *kafkaBackend) DescribeGroup(ctx context.Context, group string) (kafkaproto.GroupDescription, error) {
	g, err := k.group(ctx, group, false)
	if err != nil {
		return kafkaproto.GroupDescription{}, err
	}
	if g == nil {
		return kafkaproto.GroupDescription{Group: group, State: string(stateDead)}, nil
	}
	return g.describe(), nil
}

func (k *kafkaBackend) DeleteGroup(ctx context.Context, group string) error {
	g, err := k.group(ctx, group, false)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: %s", kafkaproto.ErrGroupIDNotFound, group)
	}
	if err := g.deleteGroup(); err != nil {
		return toKafkaError(err)
	}
	k.s.groups.remove(g)
	k.s.metrics.forgetGroupLag(group)
	return nil
}
