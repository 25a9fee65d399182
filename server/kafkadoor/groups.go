package kafkadoor

import (
	"context"
	"fmt"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/groups"
)

// The Kafka door's group APIs: the coordinator (server/groups) answers,
// toKafka translates what the broker under it returned.

var _ kafkaproto.GroupCoordinator = (*Backend)(nil)

// groups returns the node's coordinator (nil on a controller-only node,
// which the listener never serves).
func (k *Backend) groups() (*groups.Coordinator, error) {
	if k.cfg.Groups == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.cfg.Groups, nil
}

func (k *Backend) GroupCoordinatorID(ctx context.Context, group string) (int32, error) {
	c, err := k.groups()
	if err != nil {
		return -1, err
	}
	id, err := c.GroupCoordinatorID(ctx, group)
	return id, toKafka(err)
}

func (k *Backend) JoinGroup(ctx context.Context, req kafkaproto.JoinRequest) (kafkaproto.JoinResult, error) {
	c, err := k.groups()
	if err != nil {
		return kafkaproto.JoinResult{MemberID: req.MemberID}, err
	}
	res, err := c.JoinGroup(ctx, req)
	return res, toKafka(err)
}

func (k *Backend) SyncGroup(ctx context.Context, req kafkaproto.SyncRequest) (kafkaproto.SyncResult, error) {
	c, err := k.groups()
	if err != nil {
		return kafkaproto.SyncResult{}, err
	}
	res, err := c.SyncGroup(ctx, req)
	return res, toKafka(err)
}

func (k *Backend) Heartbeat(ctx context.Context, m kafkaproto.MemberRef) error {
	c, err := k.groups()
	if err != nil {
		return err
	}
	return toKafka(c.Heartbeat(ctx, m))
}

func (k *Backend) LeaveGroup(ctx context.Context, group string, members []kafkaproto.MemberRef) ([]error, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	errs, err := c.LeaveGroup(ctx, group, members)
	return errs, toKafka(err)
}

func (k *Backend) CommitOffsets(ctx context.Context, m kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	errs, err := c.CommitOffsets(ctx, m, offsets)
	return errs, toKafka(err)
}

func (k *Backend) FetchOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]kafkaproto.CommittedOffset, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	res, err := c.FetchOffsets(ctx, group, parts)
	return res, toKafka(err)
}

func (k *Backend) DeleteOffsets(ctx context.Context, group string, parts []kafkaproto.TopicPartition) ([]error, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	errs, err := c.DeleteOffsets(ctx, group, parts)
	return errs, toKafka(err)
}

func (k *Backend) ListGroups(ctx context.Context) ([]kafkaproto.GroupListing, error) {
	c, err := k.groups()
	if err != nil {
		return nil, err
	}
	return c.ListGroups(ctx)
}

func (k *Backend) DescribeGroup(ctx context.Context, group string) (kafkaproto.GroupDescription, error) {
	c, err := k.groups()
	if err != nil {
		return kafkaproto.GroupDescription{}, err
	}
	d, err := c.DescribeGroup(ctx, group)
	return d, toKafka(err)
}

func (k *Backend) DeleteGroup(ctx context.Context, group string) error {
	c, err := k.groups()
	if err != nil {
		return err
	}
	return toKafka(c.DeleteGroup(ctx, group))
}
