package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
)

// The controller RPC wire format. After the protocol byte (ProtoRPC) a
// connection carries frames (internode.WriteFrame: a 4-byte big-endian
// length, then that many bytes) of JSON, at most internode.MaxFrameBytes. The client writes one request frame, the
// server answers with one response frame; a connection may carry several
// such exchanges in turn.
//
//	request  {"v":1,"m":"<method>","hops":0,"timeout_ms":5000,"body":{...}}
//	response {"code":"","msg":"","body":{...}}  code "" is success
//
// A server answers a request with an unknown version with code "version".
const rpcVersion = 1

// ErrFrameTooLarge: a frame announced more than internode.MaxFrameBytes.
var ErrFrameTooLarge = internode.ErrFrameTooLarge

// ErrRPC: a peer answered with an error this package has no sentinel for,
// or broke the protocol.
var ErrRPC = errors.New("raftfsm: rpc failed")

type rpcRequest struct {
	Version   int             `json:"v"`
	Method    string          `json:"m"`
	Hops      int             `json:"hops,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
}

type rpcResponse struct {
	Code string          `json:"code,omitempty"`
	Msg  string          `json:"msg,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
}

// writeFrame writes v's JSON as one frame (internode.WriteFrame).
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("raftfsm: encode rpc frame: %w", err)
	}
	return internode.WriteFrame(w, b)
}

// readFrame reads one frame into v. io.EOF when the stream ends cleanly
// before a frame.
func readFrame(r io.Reader, v any) error {
	b, err := internode.ReadFrame(r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: decode frame: %v", ErrRPC, err)
	}
	return nil
}

// Error codes on the wire, one per sentinel the caller may test with
// errors.Is. codeMaybeApplied is ErrNotLeader after the command was
// proposed: it may still apply, so it is not retried.
const (
	codeMaybeApplied = "not_leader_maybe_applied"
	codeVersion      = "version"
)

var errorCodes = []struct {
	code string
	err  error
}{
	{"not_leader", raftfsm.ErrNotLeader},
	{"topic_exists", raftfsm.ErrTopicExists},
	{"unknown_topic", raftfsm.ErrUnknownTopic},
	{"unknown_broker", raftfsm.ErrUnknownBroker},
	{"stale_epoch", raftfsm.ErrStaleEpoch},
	{"invalid_partitions", raftfsm.ErrInvalidPartitions},
	{"invalid_replication_factor", raftfsm.ErrInvalidReplicationFactor},
	{"invalid_topic_name", raftfsm.ErrInvalidTopicName},
	{"policy_violation", raftfsm.ErrPolicyViolation},
	{"quorum_change", raftfsm.ErrQuorumChange},
	{"not_enough_brokers", raftfsm.ErrNotEnoughBrokers},
	{"closed", raftfsm.ErrClosed},
	{"unknown_partition", raftfsm.ErrUnknownPartition},
	{"invalid_assignment", raftfsm.ErrInvalidAssignment},
	{"invalid_command", raftfsm.ErrInvalidCommand},
	{"no_reassignment", raftfsm.ErrNoReassignment},
	{"ineligible_replica", raftfsm.ErrIneligibleReplica},
	{"invalid_config", raftfsm.ErrInvalidConfig},
	{"unknown_user", raftfsm.ErrUnknownUser},
	{"unknown_token", raftfsm.ErrUnknownToken},
	{"deadline", errDeadline},
	{"canceled", errCanceled},
}

// errDeadline and errCanceled carry context errors across the wire.
var (
	errDeadline = fmt.Errorf("raftfsm: remote: %w", context.DeadlineExceeded)
	errCanceled = fmt.Errorf("raftfsm: remote: %w", context.Canceled)
)

// remoteError is an error returned by a peer: its message, and the local
// sentinel its code maps to.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// encodeError turns a handler's error into a response.
func encodeError(err error) rpcResponse {
	if err == raftfsm.ErrNotLeader {
		return rpcResponse{Code: "not_leader", Msg: err.Error()}
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			code := c.code
			if c.err == raftfsm.ErrNotLeader {
				code = codeMaybeApplied
			}
			return rpcResponse{Code: code, Msg: err.Error()}
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return rpcResponse{Code: "deadline", Msg: err.Error()}
	case errors.Is(err, context.Canceled):
		return rpcResponse{Code: "canceled", Msg: err.Error()}
	}
	return rpcResponse{Code: "error", Msg: err.Error()}
}

// decodeError turns an error response back into an error: exactly
// ErrNotLeader for "not_leader" (nothing was proposed, safe to retry), else
// a remoteError wrapping the code's sentinel (ErrRPC when unknown).
func decodeError(r rpcResponse) error {
	if r.Code == "not_leader" {
		return raftfsm.ErrNotLeader
	}
	if r.Code == codeMaybeApplied {
		return &remoteError{r.Msg, raftfsm.ErrNotLeader}
	}
	for _, c := range errorCodes {
		if c.code == r.Code {
			return &remoteError{r.Msg, c.err}
		}
	}
	return &remoteError{fmt.Sprintf("%s (code %s)", r.Msg, r.Code), ErrRPC}
}
