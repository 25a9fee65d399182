package kafkaproto

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnSweepKeys are the transaction APIs: swept here against a fake
// TxnCoordinator (every version decodes and answers) and without one
// (every version answers a non-retriable error). The real coordinator's
// tests are in server/txn and server/e2e_txn_test.go.
var txnSweepKeys = []int16{int16(kmsg.AddPartitionsToTxn), int16(kmsg.AddOffsetsToTxn), int16(kmsg.EndTxn), int16(kmsg.TxnOffsetCommit),
	int16(kmsg.DescribeTransactions), int16(kmsg.ListTransactions)}

func txnSweepRequest(key int16) kmsg.Request {
	switch key {
	case int16(kmsg.AddPartitionsToTxn):
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 7, 1
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = "sweep", []int32{0, 1}
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.AddOffsetsToTxn):
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 7, 1, "g"
		return r
	case int16(kmsg.EndTxn):
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = "tx", 7, 1, true
		return r
	case int16(kmsg.TxnOffsetCommit):
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", "g", 7, 1
		r.Generation, r.MemberID = 3, "m"
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = "sweep"
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = 1, 42, 5
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.DescribeTransactions):
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{"tx"}
		return r
	case int16(kmsg.ListTransactions):
		return kmsg.NewPtrListTransactionsRequest()
	}
	panic(fmt.Sprintf("no txn sweep request for key %d", key))
}

// txnBroker is a memBroker with a fake TxnCoordinator that records calls
// and answers err.
type txnBroker struct {
	*memBroker
	mu    sync.Mutex
	calls []string
	err   error
}

var _ TxnCoordinator = (*txnBroker)(nil)

func (b *txnBroker) record(format string, args ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
	return b.err
}

func (b *txnBroker) last() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		return ""
	}
	return b.calls[len(b.calls)-1]
}

func (b *txnBroker) TxnCoordinatorID(_ context.Context, id string) (int32, error) {
	return 1, b.record("coordinator %s", id)
}
func (b *txnBroker) AddPartitionsToTxn(_ context.Context, p TxnProducer, parts []TopicPartition) ([]error, error) {
	return make([]error, len(parts)), b.record("add %+v %v", p, parts)
}
func (b *txnBroker) AddOffsetsToTxn(_ context.Context, p TxnProducer, group string) error {
	return b.record("offsets %+v %s", p, group)
}
func (b *txnBroker) EndTxn(_ context.Context, p TxnProducer, commit bool) error {
	return b.record("end %+v %v", p, commit)
}
func (b *txnBroker) TxnCommitOffsets(_ context.Context, p TxnProducer, m MemberRef, offs []CommitOffset) ([]error, error) {
	return make([]error, len(offs)), b.record("commit %+v %s/%s/%d %+v", p, m.Group, m.MemberID, m.Generation, offs)
}
func (b *txnBroker) DescribeTransactions(_ context.Context, ids []string) []TxnDescription {
	err := b.record("describe %v", ids)
	out := make([]TxnDescription, len(ids))
	for i, id := range ids {
		out[i] = TxnDescription{TxnID: id, Err: err, State: "Ongoing", Timeout: time.Minute, StartMS: 1, ProducerID: 7, Epoch: 1,
			Partitions: []TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}}
	}
	return out
}
func (b *txnBroker) PendingTxnOffset(group string, t TopicPartition) bool {
	return group == "g" && t.Partition == 1
}
func (b *txnBroker) ListTransactions(_ context.Context, f TxnFilter) ([]TxnListing, error) {
	return []TxnListing{{TxnID: "tx", ProducerID: 7, State: "Ongoing"}}, b.record("list %+v", f)
}

// TestTxnAPIsEveryVersion sends every transaction API at every advertised
// version to a fake coordinator: each decodes, reaches the coordinator
// with the request's fields and answers without error.
func TestTxnAPIsEveryVersion(t *testing.T) {
	mem := newMemBroker()
	b := &txnBroker{memBroker: mem}
	c := dial(t, startBroker(t, b, Options{}))
	s := NewServer(b, Options{})
	for _, key := range txnSweepKeys {
		h := s.handlers[key]
		for v := h.Min; v <= h.Max; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := txnSweepRequest(key)
				req.SetVersion(v)
				resp := roundTrip(t, c, req)
				if codes := errorCodes(resp); len(codes) > 0 {
					t.Fatalf("error codes %v in %+v", codes, resp)
				}
				want := map[int16]string{
					int16(kmsg.AddPartitionsToTxn):   "add {TxnID:tx ID:7 Epoch:1} [{sweep 0} {sweep 1}]",
					int16(kmsg.AddOffsetsToTxn):      "offsets {TxnID:tx ID:7 Epoch:1} g",
					int16(kmsg.EndTxn):               "end {TxnID:tx ID:7 Epoch:1} true",
					int16(kmsg.TxnOffsetCommit):      "commit {TxnID:tx ID:7 Epoch:1} g//-1 [{TopicPartition:{Topic:sweep Partition:1} Offset:42 LeaderEpoch:-1 Metadata:<nil>}]",
					int16(kmsg.DescribeTransactions): "describe [tx]",
					int16(kmsg.ListTransactions):     "list {States:[] ProducerIDs:[] MinDuration:0s}",
				}[key]
				if key == int16(kmsg.TxnOffsetCommit) && v >= 2 {
					want = "commit {TxnID:tx ID:7 Epoch:1} g//-1 [{TopicPartition:{Topic:sweep Partition:1} Offset:42 LeaderEpoch:5 Metadata:<nil>}]"
				}
				if key == int16(kmsg.TxnOffsetCommit) && v >= 3 {
					want = "commit {TxnID:tx ID:7 Epoch:1} g/m/3 [{TopicPartition:{Topic:sweep Partition:1} Offset:42 LeaderEpoch:5 Metadata:<nil>}]"
				}
				if got := b.last(); got != want {
					t.Fatalf("coordinator got %q\nwant %q", got, want)
				}
				if d, ok := resp.(*kmsg.DescribeTransactionsResponse); ok {
					st := d.TransactionStates[0]
					if st.State != "Ongoing" || len(st.Topics) != 2 || len(st.Topics[0].Partitions) != 2 || st.TimeoutMillis != 60000 {
						t.Fatalf("describe %+v", st)
					}
				}
				if l, ok := resp.(*kmsg.ListTransactionsResponse); ok && len(l.TransactionStates) != 1 {
					t.Fatalf("list %+v", l)
				}
			})
		}
	}
}

// TestTxnUnsupportedVersions: the KIP-890 versions runnel does not
// advertise (AddPartitionsToTxn v4+ from brokers, EndTxn v5, ...) answer
// UNSUPPORTED_VERSION, not a retriable error.
func TestTxnUnsupportedVersions(t *testing.T) {
	mem := newMemBroker()
	b := &txnBroker{memBroker: mem}
	c := dial(t, startBroker(t, b, Options{}))
	s := NewServer(b, Options{})
	for _, key := range txnSweepKeys {
		h := s.handlers[key]
		for v := h.Max + 1; v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			req := txnSweepRequest(key)
			req.SetVersion(v)
			codes := errorCodes(roundTrip(t, c, req))
			if len(codes) == 0 {
				t.Fatalf("%s v%d: no error", kmsg.NameForKey(key), v)
			}
			for _, code := range codes {
				if code != kerr.UnsupportedVersion.Code {
					t.Fatalf("%s v%d: code %d, want UNSUPPORTED_VERSION", kmsg.NameForKey(key), v, code)
				}
			}
		}
	}
	if len(b.calls) != 0 {
		t.Fatalf("coordinator called: %v", b.calls)
	}
}

// TestTxnAPIsWithoutCoordinator: a broker without transactions answers
// every transaction API, at every version, with a code clients do not
// retry (never COORDINATOR_NOT_AVAILABLE, which kept franz-go's TestTxnEtl
// waiting forever), and FindCoordinator for a transactional id too.
func TestTxnAPIsWithoutCoordinator(t *testing.T) {
	b := newMemBroker()
	addr, s := startServer(t, b, Options{})
	c := dial(t, addr)
	for _, key := range txnSweepKeys {
		h := s.handlers[key]
		for v := h.Min; v <= h.Max; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := txnSweepRequest(key)
				req.SetVersion(v)
				codes := errorCodes(roundTrip(t, c, req))
				if key == int16(kmsg.ListTransactions) {
					if len(codes) != 0 {
						t.Fatalf("list transactions: codes %v", codes)
					}
					return
				}
				if len(codes) == 0 {
					t.Fatal("no error code")
				}
				for _, code := range codes {
					if code != kerr.TransactionalIDAuthorizationFailed.Code {
						t.Fatalf("code %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
					}
				}
			})
		}
	}
	for v := int16(1); v <= handlerTable()[int16(kmsg.FindCoordinator)].Max; v++ {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = 1, "tx", []string{"tx"}
		r.SetVersion(v)
		for _, code := range errorCodes(roundTrip(t, c, r)) {
			if code != kerr.TransactionalIDAuthorizationFailed.Code {
				t.Fatalf("FindCoordinator v%d type 1: code %d", v, code)
			}
		}
	}
}

// TestTxnProducerFencedByVersion: PRODUCER_FENCED (KIP-588) goes to
// clients of the versions that know it; older ones get
// INVALID_PRODUCER_EPOCH.
func TestTxnProducerFencedByVersion(t *testing.T) {
	mem := newMemBroker()
	b := &txnBroker{memBroker: mem, err: fmt.Errorf("x: %w", ErrProducerFenced)}
	c := dial(t, startBroker(t, b, Options{}))
	for _, tc := range []struct {
		key  int16
		v    int16
		want *kerr.Error
	}{
		{int16(kmsg.EndTxn), 1, kerr.InvalidProducerEpoch},
		{int16(kmsg.EndTxn), 2, kerr.ProducerFenced},
		{int16(kmsg.AddOffsetsToTxn), 0, kerr.InvalidProducerEpoch},
		{int16(kmsg.AddOffsetsToTxn), 3, kerr.ProducerFenced},
		{int16(kmsg.AddPartitionsToTxn), 1, kerr.InvalidProducerEpoch},
		{int16(kmsg.AddPartitionsToTxn), 2, kerr.ProducerFenced},
	} {
		req := txnSweepRequest(tc.key)
		req.SetVersion(tc.v)
		codes := errorCodes(roundTrip(t, c, req))
		if len(codes) == 0 || codes[0] != tc.want.Code {
			t.Errorf("%s v%d: codes %v, want %s", kmsg.NameForKey(tc.key), tc.v, codes, tc.want.Message)
		}
	}
}

// TestTxnRequestPerms: the transaction APIs need what Kafka's authorizer
// asks for (TRANSACTIONAL_ID write, the group's read, the topics' write or
// read; describe for DescribeTransactions).
func TestTxnRequestPerms(t *testing.T) {
	for _, tc := range []struct {
		key  int16
		want string
	}{
		{int16(kmsg.AddPartitionsToTxn), "[{transactional_id tx write 53} {topic sweep write 29}]"},
		{int16(kmsg.AddOffsetsToTxn), "[{transactional_id tx write 53} {group g read 30}]"},
		{int16(kmsg.EndTxn), "[{transactional_id tx write 53}]"},
		{int16(kmsg.TxnOffsetCommit), "[{transactional_id tx write 53} {group g read 30} {topic sweep read 29}]"},
		{int16(kmsg.DescribeTransactions), "[{transactional_id tx describe 53}]"},
		{int16(kmsg.ListTransactions), "[]"},
	} {
		if got := fmt.Sprint(requestPerms(txnSweepRequest(tc.key))); got != tc.want {
			t.Errorf("%s: %s, want %s", kmsg.NameForKey(tc.key), got, tc.want)
		}
	}
}

// txnDescribeDenied is a txnBroker whose ACLs let nobody describe the
// transactional id "tx" (and allow everything else).
type txnDescribeDenied struct{ *txnBroker }

func (txnDescribeDenied) Authorize(principal, host, resourceType, name, op string) bool {
	return resourceType != "transactional_id" || name != "tx" || op != "describe"
}

// TestListTransactionsFiltersByPrincipal: with authorization on,
// ListTransactions leaves out the transactions the connection's principal
// may not describe, as Kafka does (the handler's check needs the
// connection, which the listener must hand it).
func TestListTransactionsFiltersByPrincipal(t *testing.T) {
	b := txnDescribeDenied{&txnBroker{memBroker: newMemBroker()}}
	c := dial(t, startBroker(t, b, Options{RequireAuth: true}))
	roundTrip(t, c, saslHandshakeReq(mechPlain))
	if resp := saslAuth(t, c, 2, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != 0 {
		t.Fatalf("login: %+v", resp)
	}
	resp := roundTrip(t, c, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if resp.ErrorCode != 0 || len(resp.TransactionStates) != 0 {
		t.Fatalf("listed %+v to a principal that may not describe them", resp.TransactionStates)
	}
}
