// Package internode is the cluster's inter-node port: one TCP listener
// whose connections name their protocol with their first byte, dialing a
// node for a protocol, and the mutual TLS that binds a connection to the
// node id its certificate proves. raftfsm runs raft and the controller RPC
// over it; the server registers inter-broker Kafka and forwarded HTTP.
//
// # Using it
//
// Listen on the port (with an *Auth from NewAuth: certificate files or a
// cluster secret; nil runs plaintext), Handle each protocol byte, Start,
// and Close when done. Dial writes the byte and runs the client side of
// the handshake, requiring the node id it meant to reach. Handlers get a
// *PeerConn (VerifiedNodeID) when the port authenticates. WriteFrame and
// ReadFrame carry length-prefixed frames (the controller RPC's), bounded
// by MaxFrameBytes before any allocation.
//
// # Files
//
//	mux.go        Mux: Listen, Handle, Start, Close; Dial; loopback checks
//	peertls.go    Auth: certificate files or a CA derived from the cluster
//	              secret, node ids from runnel-node-<id>, the protocol byte
//	              bound as ALPN; NewCA/IssueNodeCert (`runnel certs create`)
//	frame.go      length-prefixed frames
//
// # Goroutines and locks
//
// The Mux owns its accept loop and one goroutine per accepted connection
// while its first byte is read and its handshake runs (bounded by 10 s and
// 5 s); then the protocol's handler runs on that goroutine and owns the
// connection. Close cancels handshakes, closes the listener and the
// connections not yet handed on, and waits for every goroutine, so a
// handler must return once its owner closes (raftfsm closes its raft
// stream layer before the Mux). The handler table is fixed at Start and
// read without a lock; the refusals' WARN limiter (internal/warnlimit)
// locks only its counters.
//
// It imports no other project package but the leaf internal/warnlimit.
package internode
