package quorum

// The node's configuration.

import (
	"log/slog"
	"net"
	"time"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
)

// Config configures a node.
type Config struct {
	NodeID            int32
	Dir               string           // raft log, stable store, snapshots and badger state live here
	BindAddr          string           // raft TCP listen address, e.g. 127.0.0.1:9093
	AdvertiseAddr     string           // address peers dial; default BindAddr
	Voters            []raftfsm.Server // the controller quorum; empty: this node alone
	Logger            *slog.Logger
	SnapshotThreshold uint64        // raft entries between snapshots; 0: default
	SnapshotInterval  time.Duration // 0: default
	// ElectionTimeout is raft's heartbeat and election timeout and its
	// leader lease (see raftConfig for what a failover takes). 0: 100ms for
	// a lone voter (ready fast), 1s for several voters (counted from the
	// stored configuration on restart), 200ms for a lone voter grown into a
	// quorum with AddVoter, until it restarts.
	ElectionTimeout time.Duration
	// RaftLogSegmentBytes is the size of one raft log segment file; 0:
	// 4 MiB. Small ones rotate after a few entries (tests of rotation).
	RaftLogSegmentBytes int
	// Voter: this node is a controller. A node listed in Voters is one
	// whatever Voter says, and so is a lone node (Voters empty). A node not
	// in Voters with Voter false is a broker-only node: on an empty Dir it
	// joins the quorum as a raft non-voter (Join to any controller, retried)
	// and follows the metadata log; with Voter true it waits to be added
	// with AddVoter.
	Voter bool
	// ExtraProtocols serves other protocols on BindAddr: a connection whose
	// first byte is the key is handed, after that byte, to the function,
	// which then owns it. The function is called on the accepting goroutine
	// and must return promptly (hand the conn to its own goroutine or
	// listener). ProtoRaft and ProtoRPC are reserved.
	ExtraProtocols map[byte]func(net.Conn)
	// HeartbeatInterval between a registered broker's heartbeats; 0: 2s.
	HeartbeatInterval time.Duration
	// SessionTimeout after the last heartbeat, the active controller fences
	// the broker; 0: 9s.
	SessionTimeout time.Duration
	// ClusterSecret authenticates and encrypts every connection on
	// BindAddr, accepted and dialled, raft, RPC and ExtraProtocols alike:
	// mutual TLS with a cluster CA derived from the secret (package internode).
	// Nodes talk only to nodes with the same secret.
	ClusterSecret []byte
	// Limits bound the partitions a CreateTopic or CreatePartitions may ask
	// for; checked by the active controller before proposing (reserve.go).
	Limits raftfsm.Limits
	// PeerTLS: the same with per-node certificates from a real CA (the
	// certificate names runnel-node-<id>); not together with ClusterSecret.
	PeerTLS internode.PeerTLSFiles
	// AllowInsecurePeers lets a node whose raft port is reachable from
	// other machines run without inter-node authentication. Without it,
	// Open refuses to (a loopback-only port needs neither).
	AllowInsecurePeers bool
	// BrokerHealth, when set, is called before each heartbeat: why this
	// broker's disks refuse writes ("" when they are healthy). The active
	// controller keeps the last report; BrokerLiveness returns it.
	BrokerHealth func() string
}
