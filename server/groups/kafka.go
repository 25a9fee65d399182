package groups

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/runnel/runnel/kafkaproto"
)

// The group APIs as the Kafka door calls them (kafkaproto.GroupCoordinator's
// methods). Errors are the coordinator's own: kafkaproto sentinels, or the
// backend's errors, which the door translates.

func jsonValue(v any) ([]byte, error) { return json.Marshal(v) }

// GroupCoordinatorID returns the broker coordinating group, creating the
// offsets topic on first use.
func (c *Coordinator) GroupCoordinatorID(ctx context.Context, group string) (int32, error) {
	leader, _, err := c.coordinatorOf(ctx, group, true)
	if err != nil {
		return -1, err
	}
	if leader < 0 {
		return -1, fmt.Errorf("%w: offsets partition of %s has no leader", kafkaproto.ErrCoordinatorNotAvailable, group)
	}
	return leader, nil
}

func (c *Coordinator) JoinGroup(ctx context.Context, req kafkaproto.JoinRequest) (kafkaproto.JoinResult, error) {
	g, err := c.lookup(ctx, req.Group, true)
	if err != nil {
		return kafkaproto.JoinResult{MemberID: req.MemberID}, err
	}
	return g.join(ctx, req, nil)
}

func (c *Coordinator) SyncGroup(ctx context.Context, req kafkaproto.SyncRequest) (kafkaproto.SyncResult, error) {
	g, err := c.lookup(ctx, req.Group, false)
	if err != nil {
		return kafkaproto.SyncResult{}, err
	}
	if g == nil {
		return kafkaproto.SyncResult{}, fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, req.Group)
	}
	return g.sync(ctx, req)
}

func (c *Coordinator) Heartbeat(ctx context.Context, m kafkaproto.MemberRef) error {
	g, err := c.lookup(ctx, m.Group, false)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, m.Group)
	}
	return g.heartbeat(m)
}

func (c *Coordinator) LeaveGroup(ctx context.Context, group string, members []kafkaproto.MemberRef) ([]error, error) {
	g, err := c.lookup(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: no group %s", kafkaproto.ErrUnknownMemberID, group)
	}
	return g.leave(members), nil
}

func (c *Coordinator) CommitOffsets(ctx context.Context, m kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	g, err := c.lookup(ctx, m.Group, true)
	if err != nil {
		return nil, err
	}
	return g.commit(ctx, m, offsets)
}

func (c *Coordinator) FetchOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]kafkaproto.CommittedOffset, error) {
	g, err := c.lookup(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		g = newGroup(c, group, -1) // nothing committed: every offset -1
	}
	return g.fetchOffsets(parts), nil
}

func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]error, error) {
	g, err := c.lookup(ctx, group, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: %s", kafkaproto.ErrGroupIDNotFound, group)
	}
	return g.deleteOffsets(ctx, parts)
}

func (c *Coordinator) ListGroups(ctx context.Context) ([]kafkaproto.GroupListing, error) {
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

func (c *Coordinator) DescribeGroup(ctx context.Context, group string) (kafkaproto.GroupDescription, error) {
	g, err := c.lookup(ctx, group, false)
	if err != nil {
		return kafkaproto.GroupDescription{}, err
	}
	if g == nil {
		return kafkaproto.GroupDescription{Group: group, State: string(stateDead)}, nil
	}
	return g.describe(), nil
}

func (c *Coordinator) DeleteGroup(ctx context.Context, group string) error {
	g, err := c.lookup(ctx, group, false)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: %s", kafkaproto.ErrGroupIDNotFound, group)
	}
	return c.deleteGroup(g)
}

// deleteGroup writes a group's tombstones and forgets it.
func (c *Coordinator) deleteGroup(g *group) error {
	if err := g.deleteGroup(); err != nil {
		return err
	}
	c.remove(g)
	c.b.ForgetGroupLag(g.name)
	return nil
}
