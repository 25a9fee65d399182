package groups

import (
	"context"
	"fmt"

	"github.com/runnel/runnel/kafkaproto"
)

// The group coordinator's parts in transactions (the logic is in package
// server/txn): where a group's offsets live, checking a TxnOffsetCommit's
// member, and storing the offsets of a committed transaction.

// OffsetsPartition returns the __consumer_offsets partition holding
// group's offsets (creating the topic on first use).
func (c *Coordinator) OffsetsPartition(ctx context.Context, group string) (int32, error) {
	_, p, err := c.coordinatorOf(ctx, group, true)
	return p, err
}

// CheckTxnCommit checks that this broker coordinates the group of a
// TxnOffsetCommit and, when the request names a member (KIP-447, v3+),
// that it is one of the current generation, so a zombie consumer cannot
// commit.
func (c *Coordinator) CheckTxnCommit(ctx context.Context, ref kafkaproto.MemberRef) error {
	g, err := c.lookup(ctx, ref.Group, true)
	if err != nil {
		return err
	}
	if ref.Generation < 0 && ref.MemberID == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err = g.checkMemberLocked(ref)
	return err
}

// CommitTxnOffsets stores the offsets of a committed transaction as the
// group's, whatever its members.
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, group string, offsets []kafkaproto.CommitOffset) error {
	g, err := c.lookup(ctx, group, true)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if g.state == stateDead {
		g.mu.Unlock()
		return fmt.Errorf("%w: group %s was deleted", errGroupNotCoordinator, group)
	}
	_, written := g.storeOffsetsLocked(offsets)
	g.mu.Unlock()
	if written == nil {
		return nil
	}
	select {
	case err := <-written:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
