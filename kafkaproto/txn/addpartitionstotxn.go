package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AddPartitionsToTxn, key 24: versions 0-3 (flexible from 3), the client's
// request. v4+ batches transactions for brokers verifying produces
// (KIP-890) and is not advertised: a client asking for it gets
// UNSUPPORTED_VERSION. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
const (
	addPartitionsToTxnKey = 24
	addPartitionsToTxnMin = 0
	addPartitionsToTxnMax = 3
)

func addPartitionsToTxn(env kapi.Env, ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	tc := txnCoordinator(env)
	if tc == nil {
		return addPartitionsToTxnError(req, kapi.TxnErr(errNoTxnCoordinator, false))
	}
	var parts []kapi.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, kapi.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	legacy := req.Version < 2
	errs, err := tc.AddPartitionsToTxn(ctx, kapi.TxnProducer{TxnID: req.TransactionalID, ID: req.ProducerID, Epoch: req.ProducerEpoch}, parts)
	if err != nil {
		return addPartitionsToTxnError(req, kapi.TxnErr(err, legacy))
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			if i < len(errs) {
				rp.ErrorCode = kapi.TxnErr(errs[i], legacy)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func addPartitionsToTxnError(req *kmsg.AddPartitionsToTxnRequest, code int16) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.ErrorCode = code // v4+
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, tx := range req.Transactions {
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp
}
