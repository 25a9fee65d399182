package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
)

// Controller RPC: server and client (wire format in rpcwire.go).

const (
	defaultRPCTimeout = 10 * time.Second
	maxRPCTimeout     = time.Minute
)

// errUnreachable marks an RPC that never reached its peer (dial failed): it
// is safe to retry elsewhere. errConnLost marks one whose connection failed
// after the request may have been sent: its outcome is unknown.
var (
	errUnreachable = errors.New("raftfsm: peer unreachable")
	errConnLost    = errors.New("raftfsm: connection lost")
)

// rpcMethod is one method: whether only the leader serves it (a follower
// forwards it once), and its handler over the raw request body.
type rpcMethod struct {
	leaderOnly bool
	fn         func(ctx context.Context, body json.RawMessage) (any, error)
}

// method adapts a typed handler to rpcMethod.
func method[Req any](leaderOnly bool, fn func(context.Context, Req) (any, error)) rpcMethod {
	return rpcMethod{leaderOnly: leaderOnly, fn: func(ctx context.Context, body json.RawMessage) (any, error) {
		var req Req
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, fmt.Errorf("%w: decode request: %v", ErrRPC, err)
			}
		}
		return fn(ctx, req)
	}}
}

// rpcServer serves ProtoRPC connections, each on the mux goroutine that
// accepted it. Safe for concurrent use; close closes every open connection.
type rpcServer struct {
	n       *Node
	methods map[string]rpcMethod // fixed after construction

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

func (s *rpcServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *rpcServer) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *rpcServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

// serve answers requests on conn until it fails or the server closes.
func (s *rpcServer) serve(conn net.Conn) {
	if !s.track(conn) {
		conn.Close()
		return
	}
	defer s.untrack(conn)
	for {
		var req rpcRequest
		if err := readFrame(conn, &req); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.n.log.Debug("raftfsm: rpc read", "remote", conn.RemoteAddr().String(), "err", err)
			}
			return
		}
		if err := writeFrame(conn, s.answer(req)); err != nil {
			return
		}
	}
}

// answer runs one request under its timeout and the node's lifetime.
func (s *rpcServer) answer(req rpcRequest) rpcResponse {
	if req.Version != rpcVersion {
		return rpcResponse{Code: codeVersion, Msg: fmt.Sprintf("rpc version %d, want %d", req.Version, rpcVersion)}
	}
	m, ok := s.methods[req.Method]
	if !ok {
		return rpcResponse{Code: "error", Msg: fmt.Sprintf("unknown rpc method %q", req.Method)}
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 || timeout > maxRPCTimeout {
		timeout = defaultRPCTimeout
	}
	ctx, cancel := context.WithTimeout(s.n.q.ctx, timeout)
	defer cancel()
	var res any
	var err error
	if m.leaderOnly && !s.n.isLeader() {
		res, err = s.n.forward(ctx, req)
	} else {
		res, err = m.fn(ctx, req.Body)
	}
	if err != nil {
		return encodeError(err)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return encodeError(fmt.Errorf("raftfsm: encode %s result: %w", req.Method, err))
	}
	return rpcResponse{Body: body}
}

// forward sends a leader-only request on to the leader, once.
func (n *Node) forward(ctx context.Context, req rpcRequest) (any, error) {
	if req.Hops > 0 {
		return nil, raftfsm.ErrNotLeader
	}
	addr, ok := n.leaderAddr()
	if !ok {
		return nil, raftfsm.ErrNotLeader
	}
	var raw json.RawMessage
	if err := n.callAddr(ctx, addr, req.Method, 1, req.Body, &raw); err != nil {
		switch {
		case errors.Is(err, errUnreachable):
			return nil, raftfsm.ErrNotLeader
		case errors.Is(err, errConnLost):
			return nil, fmt.Errorf("%w (%v; it may still apply)", raftfsm.ErrNotLeader, err)
		}
		return nil, err
	}
	return raw, nil
}

// callAddr sends one request to addr and decodes the answer's body into
// resp (nil: ignored). ctx bounds the whole exchange and is sent along as
// the request's timeout.
func (n *Node) callAddr(ctx context.Context, addr, method string, hops int, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("raftfsm: encode %s request: %w", method, err)
	}
	r := rpcRequest{Version: rpcVersion, Method: method, Hops: hops, Body: body}
	if dl, ok := ctx.Deadline(); ok {
		r.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	conn, err := internode.Dial(ctx, addr, ProtoRPC, n.auth, -1)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreachable, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var out rpcResponse
	err = writeFrame(conn, r)
	if err == nil {
		err = readFrame(conn, &out)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("raftfsm: %s to %s: %w", method, addr, ctx.Err())
		}
		return fmt.Errorf("raftfsm: %s to %s: %w: %w", method, addr, errConnLost, err)
	}
	if out.Code != "" {
		return decodeError(out)
	}
	if resp == nil || len(out.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(out.Body, resp); err != nil {
		return fmt.Errorf("%w: decode %s answer: %v", ErrRPC, method, err)
	}
	return nil
}

// retryPause is how long a call to the leader waits before trying again
// when there is no leader or it moved.
const retryPause = 50 * time.Millisecond

// maxLeaderWait bounds how long a call waits for a reachable active
// controller: longer than an election on this package's timeouts, much
// shorter than a request timeout, so that without a quorum a caller hears
// so at once (and retries) instead of when its own deadline runs out.
const maxLeaderWait = 4 * time.Second

// onLeader runs a leader-only method: locally while this node leads, else
// through the leader's RPC. While there is no leader, or it moved before the
// request was proposed, it retries until ctx is done, then returns
// ErrNotLeader. resp receives the RPC answer; local's result is returned.
func (n *Node) onLeader(ctx context.Context, method string, req, resp any, local func(context.Context) (any, error)) (any, error) {
	var leaderless time.Time // when this call first found no reachable leader
	for {
		if n.isClosed() {
			return nil, raftfsm.ErrClosed
		}
		var res any
		var err error
		if n.isLeader() {
			res, err = local(ctx)
		} else if addr, ok := n.leaderAddr(); ok {
			err = n.callAddr(ctx, addr, method, 0, req, resp)
		} else {
			err = raftfsm.ErrNotLeader
		}
		if errors.Is(err, errConnLost) {
			// The leader may have applied it: not retried.
			return nil, fmt.Errorf("%w (%v; it may still apply)", raftfsm.ErrNotLeader, err)
		}
		if err != raftfsm.ErrNotLeader && !errors.Is(err, errUnreachable) {
			return res, err
		}
		// An election takes about an election timeout; past a few of them
		// there is no quorum to wait for: fail fast, the caller retries.
		if leaderless.IsZero() {
			leaderless = time.Now()
		} else if time.Since(leaderless) > maxLeaderWait {
			return nil, fmt.Errorf("%w (%s: no reachable controller for %v)", raftfsm.ErrNotLeader, method, maxLeaderWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%s: %v)", raftfsm.ErrNotLeader, method, ctx.Err())
		case <-n.done:
			return nil, raftfsm.ErrClosed
		case <-time.After(retryPause):
		}
	}
}
