package groups

import (
	"context"
)

// The group coordinator's parts in transactions (the transaction state
// machine is package server/txn): where a group's offsets live, and the
// offsets staged in transactions (txnoffsets.go).

// OffsetsPartition returns the __consumer_offsets partition holding
// group's offsets (creating the topic on first use).
func (c *Coordinator) OffsetsPartition(ctx context.Context, group string) (int32, error) {
	_, p, err := c.coordinatorOf(ctx, group, true)
	return p, err
}
