// Package raftfsm is runnel's metadata quorum: a hashicorp/raft node whose
// state machine holds the cluster metadata (cluster id, brokers, topics and
// their partitions, producer id blocks) in badger, with an immutable
// in-memory Image for the hot path. The network it runs on (the port mux,
// dialing, inter-node TLS, frames) is package internode.
//
// # Using it
//
// Open a Node (it bootstraps on an empty Dir when it is among Config.Voters;
// restarts never bootstrap again), WaitReady, then Apply commands from any
// node (forwarded to the leader over the controller RPC) and read Image()
// anywhere. Image returns a channel closed when a newer image is published,
// so readers can wait for changes without polling. A broker-only node
// (Config.Voter false, not in Voters) joins as a raft non-voter and follows
// the log; RegisterBroker starts its heartbeats, ControlledShutdown ends them.
//
// # One port
//
// BindAddr serves every protocol through an internode.Mux; a connection's
// first byte picks it: 'R' raft (transport.go's stream layer), 'C' the
// controller RPC (JSON in internode frames, rpcwire.go), others from
// Config.ExtraProtocols. DialNode dials a node and writes the byte.
// Addresses come from this node's view: Config.Voters for controllers, the
// registered brokers' RaftAddr for the others, the raft configuration last.
// With Config.PeerTLS or Config.ClusterSecret every connection then runs
// mutual TLS 1.3 with the protocol byte as its ALPN protocol, and handlers
// get an *internode.PeerConn naming the node its certificate proves; a
// port other machines can reach refuses to run without it unless
// Config.AllowInsecurePeers.
//
// # Files
//
//	api.go        errors, Config, Status, the model (Image, Broker, Topic,
//	              Partition) and the commands
//	node.go       Node: open/bootstrap, raft config, Close
//	transport.go  the protocol bytes, raft's stream layer over the mux,
//	              the advertised address
//	transport_gate.go  raft's transport with counted heartbeat handlers, so
//	              Close waits for them before closing the stores
//	rpcwire.go    controller RPC messages (JSON in internode frames) and
//	              error codes
//	rpc.go        controller RPC server and client, forwarding to the leader
//	quorum.go     transport and address book, the RPC method table, Apply,
//	              AddVoter/RemoveVoter, Join, DialNode, ControllerStatuses
//	sessions.go   the active controller's broker sessions: fencing,
//	              unfencing, moving partition leaders, controlled shutdown
//	broker.go     a broker's side: RegisterBroker, heartbeats,
//	              ControlledShutdown, BrokerLiveness
//	propose.go    applyLocal/applyAll and what is decided before proposing;
//	              the leader loop that creates the cluster id
//	status.go     Image, WaitReady, Status, timeout tuning
//	membership.go local AddVoter/AddNonvoter/RemoveVoter, Snapshot
//	voters.go     membership safety: probe, non-voter first, catch-up,
//	              refusing changes that lose the majority (ErrQuorumChange)
//	recover.go    RecoverQuorum: a new voter set on a stopped node's Dir
//	limits.go     hard bounds the FSM applies to every command,
//	              ValidateTopicName, Config.Limits and in-flight reservations
//	command.go    the command envelope's encoding (JSON) and checks
//	fsm.go        the raft.FSM: decode, skip applied indexes, one switch,
//	              commit to badger, publish the image
//	commands.go   one handler per command: validation and changes
//	users.go, acls.go, tokens.go  the security commands: SCRAM credentials
//	              (UpsertUserScram, DeleteUser), ACL entries (CreateACLs,
//	              DeleteACLs) and API token hashes (CreateToken, DeleteToken);
//	              secrets are derived or drawn by the node before proposing
//	quotas.go     client quotas by entity (SetQuotas)
//	image.go      Image copy-on-write, Digest, the publishing holder
//	topicmap.go   TopicMap: the topics as a persistent radix tree (hashicorp's
//	              go-immutable-radix), so a batch costs O(change), not O(topics)
//	state.go      badger layout of the state machine, loading an image
//	snapshot.go   snapshot format, Persist and Restore
//	placement.go  replica placement for CreateTopic/CreatePartitions
//	logstore.go   raft.LogStore and raft.StableStore on badger
//	badger.go     badger options; logging.go: badger and raft logs to slog
//
// # On disk (under Config.Dir)
//
//	raft/       badger, SyncWrites: the raft log ("l"+index) and stable store ("s"+key)
//	state/      badger, SyncWrites: the state machine (see state.go)
//	snapshots/  raft's file snapshot store (format in snapshot.go)
//
// # Idempotence
//
// Every batch of applied commands commits its changes together with
// meta/applied (the raft index of its last applied command) in one badger
// transaction (command by command when the batch is too big for one).
// ApplyBatch skips indexes at or below it,
// and Restore ignores a snapshot the state has already passed, so raft
// restoring its newest snapshot and replaying the log on start is a no-op.
// Apply is deterministic: what needs randomness or the current cluster view
// (topic ids, replica placement, the cluster id) is decided before proposing.
//
// # Untrusted commands
//
// The log is input like any other: DecodeCommand checks every command
// against hard bounds and Kafka's topic-name rules (limits.go) before the
// FSM applies it, so no command can name a path or drive an unbounded
// allocation; the active controller also checks Config.Limits (counting
// proposals in flight) before it places replicas. A controller joins as a
// non-voter and votes only once it answers and has caught up, and no
// membership change may leave fewer answering voters than a majority.
//
// # Goroutines and locks
//
// Raft owns its goroutines; Close shuts raft down first, which resolves every
// pending future. The Node owns the leader loop (proposes InitCluster when it
// leads a cluster without id), the controller loop (fences and moves leaders
// while it leads), the join loop of a new non-voter, the heartbeat loop of a
// registered broker and one waiter per Apply in flight; Close cancels and
// waits for them. The internode.Mux owns its accept loop and one goroutine
// per connection while it is dispatched (an RPC connection is served on
// it); Close closes the stream layer, the RPC connections, then the Mux,
// and waits. Node.mu
// guards only the closing flag while a goroutine is added; quorum.hbMu the
// broker registration; sessions.mu the session table; quorum.reconcileMu
// serialises leader moves (taken before no other lock); reserved.mu the
// partitions of proposals in flight (held for no I/O). The FSM is called by raft from one goroutine; images
// are published through an atomic pointer, so readers take no lock.
package raftfsm
