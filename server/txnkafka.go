package server

import (
	"context"
	"fmt"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

var _ kafkaproto.TxnCoordinator = (*kafkaBackend)(nil)

// txnCoord returns the node's transaction coordinator.
func (k *kafkaBackend) txnCoord() (*txnState, error) {
	if k.s.txn == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.s.txn, nil
}

func (k *kafkaBackend) TxnCoordinatorID(ctx context.Context, id string) (int32, error) {
	return k.s.txnCoordinatorOf(ctx, id)
}

// initTransactionalProducer is InitProducerId with a transactional id.
func (k *kafkaBackend) initTransactionalProducer(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	t, err := k.txnCoord()
	if err != nil {
		return -1, -1, err
	}
	return t.coord.InitProducerID(ctx, id, timeout, pid, epoch)
}

func (k *kafkaBackend) AddPartitionsToTxn(ctx context.Context, p kafkaproto.TxnProducer, parts []kafkaproto.TopicPartition) ([]error, error) {
	t, err := k.txnCoord()
	if err != nil {
		return nil, err
	}
	return t.coord.AddPartitions(ctx, p, parts)
}

func (k *kafkaBackend) AddOffsetsToTxn(ctx context.Context, p kafkaproto.TxnProducer, group string) error {
	t, err := k.txnCoord()
	if err != nil {
		return err
	}
	return t.coord.AddOffsets(ctx, p, group)
}

func (k *kafkaBackend) EndTxn(ctx context.Context, p kafkaproto.TxnProducer, commit bool) error {
	t, err := k.txnCoord()
	if err != nil {
		return err
	}
	return t.coord.EndTxn(ctx, p, commit)
}

func (k *kafkaBackend) TxnCommitOffsets(ctx context.Context, p kafkaproto.TxnProducer, m kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	if k.s.groups == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.s.groups.StageTxnOffsets(ctx, m, p.ID, p.Epoch, offsets)
}

func (k *kafkaBackend) DescribeTransactions(ctx context.Context, ids []string) []kafkaproto.TxnDescription {
	t, err := k.txnCoord()
	if err != nil {
		out := make([]kafkaproto.TxnDescription, len(ids))
		for i, id := range ids {
			out[i] = kafkaproto.TxnDescription{TxnID: id, Err: err}
		}
		return out
	}
	return t.coord.Describe(ids)
}

func (k *kafkaBackend) ListTransactions(ctx context.Context, f kafkaproto.TxnFilter) ([]kafkaproto.TxnListing, error) {
	t, err := k.txnCoord()
	if err != nil {
		return nil, err
	}
	var out []kafkaproto.TxnListing
	for _, d := range t.coord.List(f) {
		out = append(out, kafkaproto.TxnListing{TxnID: d.TxnID, ProducerID: d.ProducerID, State: d.State})
	}
	return out, nil
}

func (k *kafkaBackend) PendingTxnOffset(group string, t kafkaproto.TopicPartition) bool {
	return k.s.groups != nil && k.s.groups.PendingTxnOffset(group, t)
}
