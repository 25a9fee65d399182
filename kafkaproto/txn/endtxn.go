package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// EndTxn, key 26: versions 0-4 (flexible from 3). v5 bumps the producer's
// epoch at every end (KIP-890 part 2, transaction.version 2) and is not
// advertised. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
const (
	endTxnKey = 26
	endTxnMin = 0
	endTxnMax = 4
)

func endTxn(env kapi.Env, ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	tc := txnCoordinator(env)
	if tc == nil {
		return endTxnError(req, kapi.TxnErr(errNoTxnCoordinator, false))
	}
	err := tc.EndTxn(ctx, kapi.TxnProducer{TxnID: req.TransactionalID, ID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Commit)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = kapi.TxnErr(err, req.Version < 2)
	resp.ProducerID, resp.ProducerEpoch = -1, -1 // v5+
	return resp
}

func endTxnError(req *kmsg.EndTxnRequest, code int16) *kmsg.EndTxnResponse {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
