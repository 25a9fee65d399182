package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeTransactions, key 65: version 0 (flexible). Each id is answered
// by its coordinator: another broker's ids get NOT_COORDINATOR, unknown
// ones TRANSACTIONAL_ID_NOT_FOUND.
const (
	describeTransactionsKey = 65
	describeTransactionsMin = 0
	describeTransactionsMax = 0
)

func describeTransactions(env kapi.Env, ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	tc := txnCoordinator(env)
	if tc == nil {
		return describeTransactionsError(req, kapi.TxnErr(errNoTxnCoordinator, false))
	}
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, d := range tc.DescribeTransactions(ctx, req.TransactionalIDs) {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = d.TxnID, kapi.TxnErr(d.Err, false)
		st.State, st.TimeoutMillis, st.StartTimestamp = d.State, int32(d.Timeout.Milliseconds()), d.StartMS
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
		if d.Err != nil {
			st.StartTimestamp, st.ProducerID, st.ProducerEpoch = -1, -1, -1
		}
		for _, p := range d.Partitions {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = p.Topic
				st.Topics = append(st.Topics, t)
			}
			t := &st.Topics[len(st.Topics)-1]
			t.Partitions = append(t.Partitions, p.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func describeTransactionsError(req *kmsg.DescribeTransactionsRequest, code int16) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, code
		st.StartTimestamp, st.ProducerID, st.ProducerEpoch = -1, -1, -1
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}
