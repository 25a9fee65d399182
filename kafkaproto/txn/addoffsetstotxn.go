package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AddOffsetsToTxn, key 25: versions 0-3 (flexible from 3). v4 only adds
// TRANSACTION_ABORTABLE (KIP-890), which runnel does not answer, and is not
// advertised. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
const (
	addOffsetsToTxnKey = 25
	addOffsetsToTxnMin = 0
	addOffsetsToTxnMax = 3
)

func addOffsetsToTxn(env kapi.Env, ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	tc := txnCoordinator(env)
	if tc == nil {
		return addOffsetsToTxnError(req, kapi.TxnErr(errNoTxnCoordinator, false))
	}
	err := tc.AddOffsetsToTxn(ctx, kapi.TxnProducer{TxnID: req.TransactionalID, ID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Group)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = kapi.TxnErr(err, req.Version < 2)
	return resp
}

func addOffsetsToTxnError(req *kmsg.AddOffsetsToTxnRequest, code int16) *kmsg.AddOffsetsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp
}
