package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// TxnOffsetCommit, key 28: versions 0-3 (flexible from 3; v2 adds leader
// epochs, v3 the member's generation and ids, KIP-447). Served by the
// group's coordinator, which stages the offsets until the transaction
// ends. v4+ (KIP-890) is not advertised.
const (
	txnOffsetCommitKey = 28
	txnOffsetCommitMin = 0
	txnOffsetCommitMax = 3
)

func txnOffsetCommit(env kapi.Env, ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	tc := txnCoordinator(env)
	if tc == nil {
		return txnOffsetCommitError(req, kapi.TxnErr(errNoTxnCoordinator, false))
	}
	var offsets []kapi.CommitOffset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			le := p.LeaderEpoch
			if req.Version < 2 {
				le = -1
			}
			offsets = append(offsets, kapi.CommitOffset{TopicPartition: kapi.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Offset: p.Offset, LeaderEpoch: le, Metadata: p.Metadata})
		}
	}
	ref := kapi.MemberRef{Group: req.Group, Generation: -1}
	if req.Version >= 3 {
		ref.MemberID, ref.InstanceID, ref.Generation = req.MemberID, req.InstanceID, req.Generation
	}
	p := kapi.TxnProducer{TxnID: req.TransactionalID, ID: req.ProducerID, Epoch: req.ProducerEpoch}
	errs, err := tc.TxnCommitOffsets(ctx, p, ref, offsets)
	legacy := req.Version < 3
	if err != nil {
		return txnOffsetCommitError(req, kapi.TxnErr(err, legacy))
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
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

func txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
