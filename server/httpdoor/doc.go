// Package httpdoor is the HTTP door's adapter: a Door implements
// api.Backend and its optional interfaces over the node's metadata
// (raftfsm), the data plane (server/broker), the coordinators
// (server/groups, the transaction coordinator's list) and the security
// surface (server/access), and translates their errors into the api's
// sentinels (one table, backend.go). It reaches the rest of the node only
// through Config: the Metadata and Metrics interfaces, the metadata changes
// of server/admin, and functions for what exists only once the node is
// ready (the broker, the group coordinator).
// The root package server builds one Door and wires it; this package never
// imports server.
//
// Files:
//   - backend.go: cluster, brokers, topics, produce and consume (routing a
//     partition to its leader), the error table;
//   - batch.go: the binary RecordBatch media type (api.BatchBackend);
//   - groups.go: the group APIs, and GroupsProxy, which sends a group's
//     requests to the node that coordinates it;
//   - transactions.go: GET /v1/transactions, asking every alive broker;
//   - access.go: ACLs, users, API tokens, UI sessions, and WithAuth (the
//     HTTP authentication, audit and authorization middleware);
//   - quotas.go: the client quota API (enforcement is quota.Node.HTTP);
//   - forward.go: produce and consume forwarded to a partition's leader over
//     the inter-node port (one hop) by the Forwarder, which owns the
//     connections it dials (Close), MarkForwarded;
//   - hostcheck.go: which requests arrived over the inter-node port (exempt
//     from the Host check, counted node-wide by the per-client limits);
//   - partitioner.go: Kafka's key partitioner (murmur2).
//
// Goroutines: a Door starts none of its own. Requests run on the HTTP
// server's goroutines; ListTransactions asks the brokers in parallel, one
// goroutine each, and waits for them all (each bounded by txnListTimeout)
// before it returns. The forwarder owns the connections it dials (its
// http.Transport runs two goroutines on each, idle ones included):
// Forwarder.Close, which the server calls once nothing forwards, closes
// them all.
//
// Lock order: the Door holds no lock of its own (the sticky partition is an
// atomic); ListTransactions's mu is a leaf guarding its result, and so is
// the Forwarder's mu, guarding the set of its connections (held for no
// dial, close or request). The locks of
// the packages it calls are taken inside them, and none is held while it
// forwards a request to another node.
package httpdoor

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/access"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/quota"
)

// Metadata is the node's metadata as the door reads it (*raftfsm.Node).
// Safe for concurrent use.
type Metadata interface {
	Image() (*raftfsm.Image, <-chan struct{})
	Status() raftfsm.Status
	ControllerStatuses(ctx context.Context) []raftfsm.Status
	AddVoter(ctx context.Context, s raftfsm.Server) error
	RemoveVoter(ctx context.Context, id int32) error
	BrokerLiveness(ctx context.Context) (map[int32]raftfsm.Liveness, error)
}

// Metrics counts what the door moves. Safe for concurrent use.
type Metrics interface {
	Produced(topic string, records, bytes int)
	Consumed(topic string, records, bytes int)
	IdempotentReplay(topic string) // a batch answered from its Idempotency-Key
	Series() api.Series            // the UI charts' last hour
}

// Config is what a Door reaches of its node. The functions are called on
// request goroutines and must be safe for concurrent use.
type Config struct {
	NodeID int32
	Roles  []string
	Build  api.Build
	Logger *slog.Logger
	Now    func() time.Time // the records' CreateTime (the node's, test faults included)

	Meta    Metadata
	Admin   *admin.Admin // topics, configs, reassignment, elections (server/admin)
	Access  *access.Access
	Quotas  *quota.Node // the client quotas (GET/PUT /v1/quotas)
	Metrics Metrics
	Storage *broker.StorageHealth // what the storage loop last saw; nil: none

	// Ready: the node finished starting. Broker and Groups are nil until the
	// broker started, and on a node that is not one.
	Ready  func() bool
	Broker func() *broker.Broker
	Groups func() *groups.Coordinator
	// KafkaListener: this node runs the Kafka listener.
	KafkaListener func() bool
	// Transactions lists this broker's transactional ids in state ("": all).
	Transactions func(state string) []kafkaproto.TxnDescription

	// DialNode reaches a node's forwarded-HTTP protocol on the inter-node
	// port; DialBroker its inter-broker Kafka protocol (hello sent).
	DialNode   func(ctx context.Context, id int32) (net.Conn, error)
	DialBroker func(ctx context.Context, id int32) (net.Conn, error)
}

// Door is the node as the HTTP API sees it. Safe for concurrent use.
type Door struct {
	cfg     Config
	forward *Forwarder
	sticky  atomic.Uint32 // partition choice for records without key or partition
}

// New builds the door; it starts nothing.
func New(cfg Config) *Door {
	return &Door{cfg: cfg, forward: NewForwarder(cfg.DialNode)}
}

// Forwarder is the door's: the group coordinator's reads of partitions led
// elsewhere go through it too.
func (d *Door) Forwarder() *Forwarder { return d.forward }
