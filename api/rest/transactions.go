package rest

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type transactionsResource struct{ h *handler }

func (t transactionsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", t.list)
	return r
}

func (t transactionsResource) list(w http.ResponseWriter, r *http.Request) {
	tb, ok := t.h.b.(api.TransactionsBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: transactions", api.ErrNotImplemented))
		return
	}
	txns, err := tb.ListTransactions(r.Context(), r.URL.Query().Get("state"))
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	if txns == nil {
		txns = []api.Transaction{}
	}
	for i := range txns {
		if txns[i].Partitions == nil {
			txns[i].Partitions = []api.TopicPartition{}
		}
	}
	t.h.writeJSON(w, r, http.StatusOK, api.TransactionList{Transactions: txns})
}
