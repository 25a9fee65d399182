// Package quorum is runnel's metadata quorum: a hashicorp/raft node that
// runs package raftfsm's state machine, with its raft log and stable store
// in hashicorp/raft-wal and the state in badger. The network it runs on (the port mux, dialing, inter-node TLS,
// frames) is package internode.
//
// # Using it
//
// Open a Node (it bootstraps on an empty Dir when it is among Config.Voters;
// restarts never bootstrap again), WaitReady, then Apply raftfsm commands
// from any node (forwarded to the leader over the controller RPC) and read
// Image() anywhere. Image returns a channel closed when a newer image is
// published, so readers can wait for changes without polling. A broker-only
// node (Config.Voter false, not in Voters) joins as a raft non-voter and
// follows the log; RegisterBroker starts its heartbeats, ControlledShutdown
// ends them.
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
//	config.go     Config
//	node.go       Node: open/bootstrap, raft config (timeouts and what a
//	              failover takes), Close (an active controller hands its
//	              leadership over first)
//	transport.go  the protocol bytes, raft's stream layer over the mux
//	              (it kicks the leader watch when a peer's connection
//	              ends, the controller loop when one it dialled does),
//	              the advertised address
//	watch.go      the leader watch's wiring (package leaderwatch): a
//	              follower whose leader's process died stands at once,
//	              through a TimeoutNow to itself
//	transport_gate.go  raft's transport with counted heartbeat handlers, so
//	              Close waits for them before closing the stores
//	rpcwire.go    controller RPC messages (JSON in internode frames) and
//	              error codes
//	rpc.go        controller RPC server and client, forwarding to the leader
//	quorum.go     transport and address book, the RPC method table, Apply,
//	              AddVoter/RemoveVoter, Join, DialNode, ControllerStatuses
//	sessions.go   the active controller's broker sessions: fencing,
//	              unfencing, moving partition leaders (what moves where is
//	              package leadermoves), controlled shutdown
//	brokerprobe.go  the active controller probes a broker whose heartbeat
//	              is 1.5 intervals late at its node's inter-node port
//	              (every broker when a raft connection it dialled ends,
//	              and at a takeover); a refusal or reset
//	              (leaderwatch.Gone: its process is gone) fences it at
//	              once, not a session timeout later, and its leaderships
//	              move at once
//	broker.go     a broker's side: RegisterBroker, heartbeats,
//	              ControlledShutdown, BrokerLiveness
//	propose.go    applyLocal/applyAll (a plan's leader moves proposed a
//	              few at a time, moveWindow) and what is decided before
//	              proposing; the leader loop that creates the cluster id
//	reserve.go    the partitions of proposals in flight, counted against
//	              Config.Limits
//	status.go     Image, WaitReady, Status, timeout tuning
//	catchup.go    CatchUp: waiting for the leader's metadata index
//	propagate.go  WaitBrokersApplied: how far the brokers have applied
//	version.go    raising the cluster's command version once every node
//	              applies it (versionLoop)
//	membership.go local AddVoter/AddNonvoter/RemoveVoter, Snapshot
//	voters.go     membership safety: probe, non-voter first, catch-up,
//	              refusing changes that lose the majority (ErrQuorumChange)
//	recover.go    RecoverQuorum: a new voter set on a stopped node's Dir
//	raftlog.go    the raft log and stable store (raft-wal: one fsync per
//	              append), moving an older node's badger log into it
//	raftlog_repair.go a log whose tail segment a failed append (full disk)
//	              left sealed, refusing every append, rebuilt at open
//	failstop.go   a failed write of the raft log, stable store or state
//	              store (raftfsm's failstop.go) is fatal:
//	              logged once, Node.Failed closes and the process exits
//	              (server.Run) instead of running on with frozen metadata
//	logstore.go   the badger raft log of older versions, read to move it
//	logging.go    raft's logs to slog
//
// # On disk (under Config.Dir)
//
//	raftlog/    hashicorp/raft-wal: the raft log in 4 MiB segment files,
//	            one write and one fsync per append; the stable store and the
//	            segment list in its bbolt file; rebuilt.tmp/ and rebuilt/
//	            in it: a copy being made by a rebuild, and one complete
//	            (raftlog_repair.go)
//	raft        a file saying the log moved to raftlog/ (an older runnel
//	            fails to open its badger there); before raft-wal this was
//	            the badger log ("l"+index) and stable store ("s"+key)
//	state/      badger, no syncs: the state machine (raftfsm's state.go),
//	            rebuilt from the newest snapshot and the log after it when a
//	            machine crash left it behind (node.go's open)
//	snapshots/  raft's file snapshot store (format in raftfsm's snapshot.go)
//
// # Untrusted commands
//
// The FSM checks every command it applies (raftfsm); the active controller
// also checks Config.Limits (counting proposals in flight) before it places
// replicas. A controller joins as a non-voter and votes only once it
// answers and has caught up, and no membership change may leave fewer
// answering voters than a majority.
//
// # Goroutines and locks
//
// Raft owns its goroutines; Close (after handing leadership over, bounded
// by two election timeouts) shuts raft down first, which resolves every
// pending future. The Node owns the leader loop (proposes InitCluster when it
// leads a cluster without id), the controller loop (fences and moves leaders
// while it leads), the version loop (raises the cluster's command version
// while it leads, until it is this binary's), the join loop of a new non-voter, the heartbeat loop of a
// registered broker, the leader watch (leaderwatch.Watch.Run: probes the
// leader when a raft connection from a peer ends, and on a voter whose
// leader's port refuses and who has not heard from it for a quarter
// timeout, asks the other voters the length of their logs over the
// controller RPC and, the longest first, sends raft a TimeoutNow over a
// connection to itself; see watch.go) and one waiter per Apply in flight; Close cancels and
// waits for them (closing the stream layer ends a TimeoutNow in flight). The internode.Mux owns its accept loop and one goroutine
// per connection while it is dispatched (an RPC connection is served on
// it); Close closes the stream layer, the RPC connections, then the Mux,
// and waits.
//
// Lock order. quorum.reconcileMu serialises leader moves and guards
// quorum.reconciled; it is taken first, with no other lock held, and held
// for a whole reconcile, the raft applies of its moves included (seconds
// at millions of partitions); sessions.mu, reserved.mu and Node.mu are
// taken under it. So the controller loop never waits for it: it only
// tries it (reconciledWith, tryReconcile) and goes on fencing and probing
// while a controlled shutdown's reconcile (onControlledShutdown, which
// waits for it) holds it. The other locks are held for no I/O:
// quorum.hbMu the broker registration and lease; sessions.mu the session
// table; brokerProbes.mu the probes in flight; reserved.mu the partitions
// of proposals in flight; leaderIndexCalls.mu CatchUp's shared question;
// gatedTransport.mu its draining flag; the stream layer's and the RPC
// server's mu their open connections (closing them is all they do under
// it). Node.mu guards only the closing flag while a
// goroutine is added (spawn), and is taken last, under hbMu,
// leaderIndexCalls.mu or reconcileMu. The FSM is called by raft from one
// goroutine; images are published through an atomic pointer,
// so readers take no lock.
package quorum
