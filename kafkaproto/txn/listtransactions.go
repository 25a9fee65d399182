package txn

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ListTransactions, key 66: versions 0-1 (flexible; v1 filters by
// duration). v2's transactional id pattern (KIP-1152) is not advertised.
// A state filter naming no known state is echoed in UnknownStateFilters.
const (
	listTransactionsKey = 66
	listTransactionsMin = 0
	listTransactionsMax = 1
)

func listTransactions(env kapi.Env, ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	tc := txnCoordinator(env)
	if tc == nil {
		return resp // no transactions here
	}
	f := kapi.TxnFilter{ProducerIDs: req.ProducerIDFilters}
	for _, st := range req.StateFilters {
		if slices.Contains(kapi.TxnStates, st) {
			f.States = append(f.States, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, st)
		}
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return resp // only unknown states: nothing matches
	}
	if req.Version >= 1 && req.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	list, err := tc.ListTransactions(ctx, f)
	if err != nil {
		resp.ErrorCode = kapi.TxnErr(err, false)
		return resp
	}
	for _, l := range list {
		if !mayDescribeTxn(env, ctx, l.TxnID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.TxnID, l.ProducerID, l.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func listTransactionsError(req *kmsg.ListTransactionsRequest, code int16) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.ErrorCode = code
	return resp
}
