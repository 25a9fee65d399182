package kafkaproto

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// InitProducerId, key 22: versions 0-5 (flexible from 2; v3+ lets an
// idempotent producer bump its epoch, KIP-360).
const (
	initProducerIDKey = 22
	initProducerIDMin = 0
	initProducerIDMax = 5
)

func (s *Server) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	ctx, cancel := kapi.AdminContext(ctx, 0)
	defer cancel()
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	id, ep, err := s.broker.InitProducerID(ctx, req.TransactionalID,
		time.Duration(req.TransactionTimeoutMillis)*time.Millisecond, pid, epoch)
	if err != nil {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kapi.TxnErr(err, req.Version < 4), -1, -1
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, ep
	return resp
}

func initProducerIDError(req *kmsg.InitProducerIDRequest, code int16) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
