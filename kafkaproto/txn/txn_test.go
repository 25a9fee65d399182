package txn

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/kafkaproto/kapi/kapitest"
)

// The transaction handlers in-process, over kapitest.Env. The sweeps of
// every key and version over a connection are kafkaproto's txn_test.go.

// noTxns is a Broker without a TxnCoordinator.
type noTxns struct{ kapi.Broker }

// listing coordinates two transactions; its other coordinator methods are
// not called here.
type listing struct {
	noTxns
	kapi.TxnCoordinator
	filter kapi.TxnFilter
}

func (l *listing) ListTransactions(_ context.Context, f kapi.TxnFilter) ([]kapi.TxnListing, error) {
	l.filter = f
	return []kapi.TxnListing{{TxnID: "mine", ProducerID: 1, State: "Ongoing"}, {TxnID: "theirs", ProducerID: 2, State: "Ongoing"}}, nil
}

// Without a TxnCoordinator the transaction APIs answer
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients do not retry, and
// ListTransactions an empty list.
func TestWithoutTxnCoordinator(t *testing.T) {
	env := &kapitest.Env{B: noTxns{}}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.Commit = "tx", 1, true
	if got := kapitest.Serve[*kmsg.EndTxnResponse](env, Handlers(), end).ErrorCode; got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("EndTxn: code %d", got)
	}
	list := kapitest.Serve[*kmsg.ListTransactionsResponse](env, Handlers(), kmsg.NewPtrListTransactionsRequest())
	if list.ErrorCode != 0 || len(list.TransactionStates) != 0 {
		t.Errorf("ListTransactions: %+v", list)
	}
}

// ListTransactions leaves out the transactions the principal may not
// describe, passes the known state filters on and echoes the unknown ones.
func TestListTransactionsFilters(t *testing.T) {
	b := &listing{}
	env := &kapitest.Env{B: b, Deny: func(typ, name, op string) bool {
		return typ == "transactional_id" && name == "theirs" && op == "describe"
	}}
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing", "Sleeping"}
	resp := kapitest.Serve[*kmsg.ListTransactionsResponse](env, Handlers(), req)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].TransactionalID != "mine" {
		t.Errorf("listed %+v, want only mine", resp.TransactionStates)
	}
	if len(resp.UnknownStateFilters) != 1 || resp.UnknownStateFilters[0] != "Sleeping" {
		t.Errorf("unknown state filters %v", resp.UnknownStateFilters)
	}
	if len(b.filter.States) != 1 || b.filter.States[0] != "Ongoing" {
		t.Errorf("coordinator asked for states %v", b.filter.States)
	}
}
