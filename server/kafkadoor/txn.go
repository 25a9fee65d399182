package kafkadoor

import (
	"context"
	"fmt"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/txn"
)

var _ kafkaproto.TxnCoordinator = (*Backend)(nil)

// txnCoord returns the node's transaction coordinator.
func (k *Backend) txnCoord() (*txn.Coordinator, error) {
	if k.cfg.Txn == nil || k.cfg.Txn.Coordinator() == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.cfg.Txn.Coordinator(), nil
}

func (k *Backend) TxnCoordinatorID(ctx context.Context, id string) (int32, error) {
	return k.cfg.Txn.CoordinatorOf(ctx, id)
}

// initTransactionalProducer is InitProducerId with a transactional id.
func (k *Backend) initTransactionalProducer(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	t, err := k.txnCoord()
	if err != nil {
		return -1, -1, err
	}
	return t.InitProducerID(ctx, id, timeout, pid, epoch)
}

func (k *Backend) AddPartitionsToTxn(ctx context.Context, p kafkaproto.TxnProducer, parts []kafkaproto.TopicPartition) ([]error, error) {
	t, err := k.txnCoord()
	if err != nil {
		return nil, err
	}
	return t.AddPartitions(ctx, p, parts)
}

func (k *Backend) AddOffsetsToTxn(ctx context.Context, p kafkaproto.TxnProducer, group string) error {
	t, err := k.txnCoord()
	if err != nil {
		return err
	}
	return t.AddOffsets(ctx, p, group)
}

func (k *Backend) EndTxn(ctx context.Context, p kafkaproto.TxnProducer, commit bool) error {
	t, err := k.txnCoord()
	if err != nil {
		return err
	}
	return t.EndTxn(ctx, p, commit)
}

func (k *Backend) TxnCommitOffsets(ctx context.Context, p kafkaproto.TxnProducer, m kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	if k.cfg.Groups == nil {
		return nil, fmt.Errorf("%w: not a broker", kafkaproto.ErrCoordinatorNotAvailable)
	}
	return k.cfg.Groups.StageTxnOffsets(ctx, m, p.ID, p.Epoch, offsets)
}

func (k *Backend) DescribeTransactions(ctx context.Context, ids []string) []kafkaproto.TxnDescription {
	t, err := k.txnCoord()
	if err != nil {
		out := make([]kafkaproto.TxnDescription, len(ids))
		for i, id := range ids {
			out[i] = kafkaproto.TxnDescription{TxnID: id, Err: err}
		}
		return out
	}
	return t.Describe(ids)
}

func (k *Backend) ListTransactions(ctx context.Context, f kafkaproto.TxnFilter) ([]kafkaproto.TxnListing, error) {
	t, err := k.txnCoord()
	if err != nil {
		return nil, err
	}
	var out []kafkaproto.TxnListing
	for _, d := range t.List(f) {
		out = append(out, kafkaproto.TxnListing{TxnID: d.TxnID, ProducerID: d.ProducerID, State: d.State})
	}
	return out, nil
}

func (k *Backend) PendingTxnOffset(group string, t kafkaproto.TopicPartition) bool {
	return k.cfg.Groups != nil && k.cfg.Groups.PendingTxnOffset(group, t)
}
