package httpdoor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker/kafkaconn"
)

// GET /v1/transactions: each alive broker describes the transactional ids
// its coordinator holds (this one directly, the others with
// ListTransactions and DescribeTransactions over the inter-broker port,
// in parallel).

const txnListTimeout = 5 * time.Second // per broker

var _ api.TransactionsBackend = (*Door)(nil)

func (h *Door) ListTransactions(ctx context.Context, state string) ([]api.Transaction, error) {
	if state != "" && !slices.Contains(kafkaproto.TxnStates, state) {
		return nil, fmt.Errorf("%w: unknown transaction state %q", api.ErrInvalidRequest, state)
	}
	img, _ := h.cfg.Meta.Image()
	var mu sync.Mutex
	var out []api.Transaction
	var errs []string
	var wg sync.WaitGroup
	for id, b := range img.Brokers {
		if b.State != raftfsm.BrokerAlive {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bctx, cancel := context.WithTimeout(ctx, txnListTimeout)
			defer cancel()
			var ds []kafkaproto.TxnDescription
			var err error
			if id == h.cfg.NodeID {
				ds = h.cfg.Transactions(state)
			} else {
				ds, err = h.remoteTransactions(bctx, id, state)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("broker %d: %v", id, err))
				return
			}
			for _, d := range ds {
				out = append(out, apiTransaction(d, id))
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 && len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", api.ErrTimeout, strings.Join(errs, "; "))
	}
	slices.SortFunc(out, func(a, b api.Transaction) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return out, nil
}

func apiTransaction(d kafkaproto.TxnDescription, coordinator int32) api.Transaction {
	t := api.Transaction{TransactionalID: d.TxnID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.Epoch,
		TimeoutMS: d.Timeout.Milliseconds(), StartMS: d.StartMS, Coordinator: coordinator, Partitions: []api.TopicPartition{}}
	for _, p := range d.Partitions {
		t.Partitions = append(t.Partitions, api.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return t
}

// remoteTransactions asks broker id for its transactional ids.
func (h *Door) remoteTransactions(ctx context.Context, id int32, state string) ([]kafkaproto.TxnDescription, error) {
	nc, err := h.cfg.DialBroker(ctx, id)
	if err != nil {
		return nil, err
	}
	kc := kafkaconn.New(nc, fmt.Sprintf("runnel-txn-%d", h.cfg.NodeID))
	defer kc.Close()
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.Version = 0
	if state != "" {
		lreq.StateFilters = []string{state}
	}
	lresp := kmsg.NewPtrListTransactionsResponse()
	if err := kc.Do(ctx, lreq, lresp); err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil {
		return nil, err
	}
	if len(lresp.TransactionStates) == 0 {
		return nil, nil
	}
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	for _, st := range lresp.TransactionStates {
		dreq.TransactionalIDs = append(dreq.TransactionalIDs, st.TransactionalID)
	}
	dresp := kmsg.NewPtrDescribeTransactionsResponse()
	if err := kc.Do(ctx, dreq, dresp); err != nil {
		return nil, err
	}
	var out []kafkaproto.TxnDescription
	for _, st := range dresp.TransactionStates {
		if st.ErrorCode != 0 {
			continue // gone or moved since the list
		}
		d := kafkaproto.TxnDescription{TxnID: st.TransactionalID, State: st.State, Timeout: time.Duration(st.TimeoutMillis) * time.Millisecond,
			StartMS: st.StartTimestamp, ProducerID: st.ProducerID, Epoch: st.ProducerEpoch}
		for _, t := range st.Topics {
			for _, p := range t.Partitions {
				d.Partitions = append(d.Partitions, kafkaproto.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		out = append(out, d)
	}
	return out, nil
}
