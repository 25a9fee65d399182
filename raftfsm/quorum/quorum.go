package quorum

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nuid"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum/leaderwatch"
)

// quorum is the multi-process side of a Node: the port mux, the controller
// RPC, broker sessions (leader side) and this node's broker registration
// (broker side).
type quorum struct {
	ctx         context.Context // the node's lifetime
	mux         *internode.Mux
	stream      *streamLayer       // raft's connections from mux
	watch       *leaderwatch.Watch // the leader watch (watch.go)
	rpc         *rpcServer
	voters      map[int32]string // Config.Voters: this node's view of the controllers' addresses
	incarnation string           // this process's broker incarnation id
	sessions    sessions         // leader side, sessions.go
	probes      brokerProbes     // leader side, brokerprobe.go
	reconcileMu sync.Mutex       // serialises partition leader moves (reconcile)
	reconciled  string           // term and broker states of the last reconcile; guarded by reconcileMu
	// The controller loop's wake-ups besides its tick (brokerprobe.go):
	// peerLost, a raft connection this node dialled ended (probe every
	// broker now, not once its heartbeats are late); fenced, a probe
	// fenced a broker (move its leaderships now, not at the next tick).
	peerLost chan struct{}
	fenced   chan struct{}

	hbMu       sync.Mutex             // guards the broker-side fields below
	registered *raftfsm.Broker        // this node's broker as last registered; nil: none
	regCmd     raftfsm.RegisterBroker // the command that registered it
	hbCancel   context.CancelFunc
	hbDone     chan struct{}
	// leaseUntil: until when this node's broker may act as a partition
	// leader: the send time of the last heartbeat the active controller
	// answered with the broker not fenced, plus the session timeout. The
	// controller fences no earlier than a session timeout after it
	// received that heartbeat, so the lease lapses first.
	leaseUntil time.Time
	// leaseSet is closed when a heartbeat answer sets leaseUntil (and
	// replaced by the next waiter): waitUnfenced waits on it.
	leaseSet chan struct{}
}

// Default broker session tuning (Kafka's).
const (
	defaultHeartbeatInterval = 2 * time.Second
	defaultSessionTimeout    = 9 * time.Second
	joinRetry                = 500 * time.Millisecond
	statusTimeout            = time.Second
)

func (n *Node) heartbeatInterval() time.Duration {
	if n.cfg.HeartbeatInterval > 0 {
		return n.cfg.HeartbeatInterval
	}
	return defaultHeartbeatInterval
}

func (n *Node) sessionTimeout() time.Duration {
	if n.cfg.SessionTimeout > 0 {
		return n.cfg.SessionTimeout
	}
	return defaultSessionTimeout
}

// newMuxTransport listens on BindAddr and builds raft's transport over the
// mux, with dial addresses from this node's view (addressBook).
func (n *Node) newMuxTransport(hl hclog.Logger) (*gatedTransport, error) {
	adv, err := advertiseAddr(n.cfg)
	if err != nil {
		return nil, err
	}
	auth, err := internode.NewAuth(n.cfg.NodeID, n.cfg.ClusterSecret, n.cfg.PeerTLS)
	if err != nil {
		return nil, err
	}
	if auth == nil && !n.cfg.AllowInsecurePeers && !(internode.IsLoopbackHost(n.cfg.BindAddr) && (adv == nil || internode.IsLoopbackAddr(adv))) {
		return nil, fmt.Errorf("%w: the raft port %s is reachable from other machines and nodes do not authenticate each other: "+
			"add --cluster-ca-file, --node-cert-file and --node-key-file (`runnel certs create` writes them), "+
			"or --cluster-secret-file; or bind --raft-addr to 127.0.0.1 (--insecure-inter-node runs without, if every machine that reaches the port is trusted)", ErrInsecurePeers, n.cfg.BindAddr)
	}
	n.auth = auth
	for b := range n.cfg.ExtraProtocols {
		if b == ProtoRaft || b == ProtoRPC {
			return nil, fmt.Errorf("%w: %q is reserved", ErrUnknownProtocol, b)
		}
	}
	m, err := internode.Listen(n.cfg.BindAddr, auth, n.log)
	if err != nil {
		return nil, err
	}
	if adv == nil {
		adv = m.Addr()
	}
	n.q.mux = m
	n.q.peerLost, n.q.fenced = make(chan struct{}, 1), make(chan struct{}, 1)
	n.q.stream = newStreamLayer(adv, auth, func() { wake(n.q.peerLost) })
	_ = m.Handle(ProtoRaft, n.q.stream.deliver)
	for b, h := range n.cfg.ExtraProtocols {
		_ = m.Handle(b, h)
	}
	n.q.voters = map[int32]string{}
	for _, v := range n.cfg.Voters {
		n.q.voters[v.ID] = v.Address
	}
	n.q.incarnation = nuid.Next()
	n.q.rpc = &rpcServer{n: n, conns: map[net.Conn]struct{}{}}
	n.q.rpc.methods = n.rpcMethods()
	_ = m.Handle(ProtoRPC, n.q.rpc.serve)
	return newGatedTransport(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: addressBook{n},
		Logger:                hl,
		Stream:                n.q.stream,
		MaxPool:               3,
		Timeout:               10 * time.Second,
	})), nil
}

// startQuorum starts the mux and the node's own loops; called once raft runs.
func (n *Node) startQuorum(ctx context.Context, joinNeeded bool) {
	n.q.ctx = ctx
	n.q.mux.Start()
	n.spawn(func() { n.controllerLoop(ctx) })
	n.spawn(func() { n.versionLoop(ctx) })
	n.spawn(func() { n.q.watch.Run(ctx) })
	if joinNeeded {
		n.spawn(func() { n.joinLoop(ctx) })
	}
}

// closeQuorum stops heartbeats, RPC and the mux; after raft shut down.
func (n *Node) closeQuorum() error {
	n.stopHeartbeats()
	if n.q.rpc != nil {
		n.q.rpc.close()
	}
	if n.q.mux == nil {
		return nil
	}
	// The stream layer first: a connection the mux is handing to raft
	// (whose transport is closed) is closed instead of waited for.
	n.q.stream.Close()
	return n.q.mux.Close()
}

// isNonvoter: a broker-only node (see Config.Voter).
func (n *Node) isNonvoter() bool {
	if n.cfg.Voter || len(n.cfg.Voters) == 0 {
		return false
	}
	_, listed := n.q.voters[n.cfg.NodeID]
	return !listed
}

func (n *Node) isLeader() bool { return n.raft.State() == raft.Leader }

// leaderAddr is where to reach the leader, from this node's view.
func (n *Node) leaderAddr() (string, bool) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return "", false
	}
	if a, err := n.addressOf(parseServerID(id)); err == nil {
		return a, true
	}
	return string(addr), addr != ""
}

// addressOf is where this node dials node id: its address in Config.Voters,
// else its registered broker's RaftAddr, else its address in the raft
// configuration.
func (n *Node) addressOf(id int32) (string, error) {
	if a, ok := n.q.voters[id]; ok {
		return a, nil
	}
	img, _ := n.Image()
	if b, ok := img.Brokers[id]; ok && b.RaftAddr != "" {
		return b.RaftAddr, nil
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.ID == serverID(id) {
				return string(s.Address), nil
			}
		}
	}
	return "", fmt.Errorf("%w: no address for node %d", raftfsm.ErrUnknownBroker, id)
}

// addressBook is raft's ServerAddressProvider: dial addresses come from
// this node's view (addressOf), the raft configuration's as the fallback.
type addressBook struct{ n *Node }

func (a addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a.n.q.voters == nil {
		return "", fmt.Errorf("raftfsm: no address book yet")
	}
	if v, ok := a.n.q.voters[parseServerID(id)]; ok {
		return raft.ServerAddress(v), nil
	}
	if parseServerID(id) == a.n.cfg.NodeID && a.n.q.mux != nil {
		// Itself (a single node started without --controllers): raft asks
		// while electing; not worth a warning on every start.
		return raft.ServerAddress(a.n.q.stream.addr.String()), nil
	}
	img, _ := a.n.fsm.Image()
	if b, ok := img.Brokers[parseServerID(id)]; ok && b.RaftAddr != "" {
		return raft.ServerAddress(b.RaftAddr), nil
	}
	return "", fmt.Errorf("raftfsm: node %s not in this node's view", id)
}

// DialNode dials node id's mux (a controller's address from Config.Voters,
// else the registered broker's RaftAddr, else the raft configuration's) and
// writes proto, the protocol byte of a Config.ExtraProtocols entry on the
// peer. ctx bounds the dial. The caller owns the connection.
func (n *Node) DialNode(ctx context.Context, id int32, proto byte) (net.Conn, error) {
	addr, err := n.addressOf(id)
	if err != nil {
		return nil, err
	}
	return internode.Dial(ctx, addr, proto, n.auth, id)
}

// rpcMethods is the controller RPC's method table.
func (n *Node) rpcMethods() map[string]rpcMethod {
	return map[string]rpcMethod{
		"apply": method(true, func(ctx context.Context, body json.RawMessage) (any, error) {
			// Strictly: a field this version does not know, forwarded by a
			// newer node, refuses the command instead of being dropped.
			cmd, err := raftfsm.UnmarshalCommand(body)
			if err != nil {
				return nil, err
			}
			res, err := n.applyLocal(ctx, cmd)
			if err != nil {
				return nil, err
			}
			return encodeResult(res)
		}),
		"join": method(true, func(ctx context.Context, s raftfsm.Server) (any, error) {
			return nil, n.joinLocal(ctx, s)
		}),
		"heartbeat": method(true, func(ctx context.Context, hb heartbeat) (any, error) {
			return n.onHeartbeat(ctx, hb)
		}),
		"status": method(false, func(context.Context, struct{}) (any, error) {
			return n.Status(), nil
		}),
		"wait_applied": method(false, n.onWaitApplied),
		"liveness": method(true, func(context.Context, struct{}) (any, error) {
			return n.q.sessions.liveness(n.raft.CurrentTerm()), nil
		}),
		"shutdown": method(true, func(ctx context.Context, req shutdownRequest) (any, error) {
			return n.onControlledShutdown(ctx, req)
		}),
		"add_voter": method(true, func(ctx context.Context, s raftfsm.Server) (any, error) {
			return nil, n.addVoterLocal(ctx, s)
		}),
		"remove_voter": method(true, func(ctx context.Context, s raftfsm.Server) (any, error) {
			return nil, n.removeVoterLocal(ctx, s.ID)
		}),
	}
}

// wireResult is an Apply result with its type tag.
type wireResult struct {
	Type      string             `json:"type"` // topic, broker, partition, int64, string, none
	Topic     *raftfsm.Topic     `json:"topic,omitempty"`
	Broker    *raftfsm.Broker    `json:"broker,omitempty"`
	Partition *raftfsm.Partition `json:"partition,omitempty"`
	Int64     int64              `json:"int64,omitempty"`
	String    string             `json:"string,omitempty"`
}

func encodeResult(res any) (wireResult, error) {
	switch v := res.(type) {
	case *raftfsm.Topic:
		return wireResult{Type: "topic", Topic: v}, nil
	case *raftfsm.Broker:
		return wireResult{Type: "broker", Broker: v}, nil
	case *raftfsm.Partition:
		return wireResult{Type: "partition", Partition: v}, nil
	case int64:
		return wireResult{Type: "int64", Int64: v}, nil
	case string:
		return wireResult{Type: "string", String: v}, nil
	case nil:
		return wireResult{Type: "none"}, nil
	}
	return wireResult{}, fmt.Errorf("%w: cannot encode result %T", ErrRPC, res)
}

func (r wireResult) value() (any, error) {
	switch r.Type {
	case "topic":
		return r.Topic, nil
	case "broker":
		return r.Broker, nil
	case "partition":
		return r.Partition, nil
	case "int64":
		return r.Int64, nil
	case "string":
		return r.String, nil
	case "none":
		return nil, nil
	}
	return nil, fmt.Errorf("%w: result type %q", ErrRPC, r.Type)
}

// Apply proposes cmd through Raft and waits until it is applied; ctx's
// deadline is the raft timeout. It returns the command's result (see each
// command) or its error (ErrTopicExists, ...). On a node that does not lead
// it is forwarded to the leader; while there is none it retries until ctx
// is done, then returns ErrNotLeader. An error wrapping ErrNotLeader other
// than ErrNotLeader itself means the command may still apply.
func (n *Node) Apply(ctx context.Context, cmd raftfsm.Command) (any, error) {
	var wr wireResult
	res, err := n.onLeader(ctx, "apply", cmd, &wr, func(ctx context.Context) (any, error) {
		return n.applyLocal(ctx, cmd)
	})
	if err != nil {
		return nil, err
	}
	if wr.Type != "" {
		return wr.value()
	}
	return res, nil
}

// joinLocal adds a broker-only node as a non-voter; harmless when it is
// already a member (voters stay voters).
func (n *Node) joinLocal(ctx context.Context, s raftfsm.Server) error {
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, m := range f.Configuration().Servers {
			if m.ID == serverID(s.ID) && (m.Suffrage == raft.Voter || string(m.Address) == s.Address) {
				return nil
			}
		}
	}
	return n.addNonvoterLocal(ctx, s)
}

// joinLoop asks the controllers, in turn, to add this node as a non-voter,
// until one has accepted or this node hears from a leader.
func (n *Node) joinLoop(ctx context.Context) {
	me := raftfsm.Server{ID: n.cfg.NodeID, Address: string(n.trans.LocalAddr())}
	for i := 0; ; i++ {
		if _, id := n.raft.LeaderWithID(); id != "" {
			return
		}
		if len(n.cfg.Voters) > 0 {
			v := n.cfg.Voters[i%len(n.cfg.Voters)]
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := n.callAddr(cctx, v.Address, "join", 0, me, nil)
			cancel()
			if err == nil {
				n.log.Info("raftfsm: joined the quorum as a non-voter", "node", n.cfg.NodeID, "via", v.ID)
				return
			}
			n.log.Debug("raftfsm: join", "via", v.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(joinRetry):
		}
	}
}

// AddVoter adds (or re-addresses) a controller; from any node (forwarded to
// the leader, retried while there is none until ctx is done).
func (n *Node) AddVoter(ctx context.Context, s raftfsm.Server) error {
	_, err := n.onLeader(ctx, "add_voter", s, nil, func(ctx context.Context) (any, error) {
		return nil, n.addVoterLocal(ctx, s)
	})
	return err
}

// RemoveVoter removes a server from the quorum; from any node (forwarded).
func (n *Node) RemoveVoter(ctx context.Context, id int32) error {
	_, err := n.onLeader(ctx, "remove_voter", raftfsm.Server{ID: id}, nil, func(ctx context.Context) (any, error) {
		return nil, n.removeVoterLocal(ctx, id)
	})
	return err
}

// ControllerStatuses asks every voter of the current configuration for its
// Status (this node answers directly), each within a short timeout; an
// unreachable voter comes back with Role "unreachable" and LeaderID -1.
func (n *Node) ControllerStatuses(ctx context.Context) []raftfsm.Status {
	var voters []raftfsm.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters = append(voters, raftfsm.Server{ID: parseServerID(s.ID), Address: string(s.Address)})
			}
		}
	}
	out := make([]raftfsm.Status, len(voters))
	var wg sync.WaitGroup
	for i, v := range voters {
		if v.ID == n.cfg.NodeID {
			out[i] = n.Status()
			continue
		}
		addr, err := n.addressOf(v.ID)
		if err != nil {
			addr = v.Address
		}
		out[i] = raftfsm.Status{ID: v.ID, Address: addr, Voter: true, Role: "unreachable", LeaderID: -1}
		wg.Add(1)
		go func() { // bounded by the timeout; waited for below
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			var st raftfsm.Status
			if err := n.callAddr(cctx, addr, "status", 0, struct{}{}, &st); err == nil {
				out[i] = st
			}
		}()
	}
	wg.Wait()
	return out
}
