// Package raftfsm is runnel's metadata quorum: a hashicorp/raft node whose
// state machine holds the cluster metadata (cluster id, brokers, topics and
// their partitions, producer id blocks) in badger, with an immutable
// in-memory Image for the hot path.
//
// # Using it
//
// Open a Node (it bootstraps on an empty Dir when it is among Config.Voters;
// restarts never bootstrap again), WaitReady, then Apply commands on the
// leader (ErrNotLeader elsewhere) and read Image() anywhere. Image returns a
// channel closed when a newer image is published, so readers can wait for
// changes without polling.
//
// # Files
//
//	api.go        errors, Config, Status, the model (Image, Broker, Topic,
//	              Partition) and the commands
//	node.go       Node: open/bootstrap, raft config, transport, Close
//	propose.go    Apply and what is decided before proposing; the leader
//	              loop that creates the cluster id
//	status.go     Image, WaitReady, Status, timeout tuning
//	membership.go AddVoter, AddNonvoter, RemoveVoter, Snapshot
//	command.go    the command envelope's encoding (JSON) and checks
//	fsm.go        the raft.FSM: decode, skip applied indexes, one switch,
//	              commit to badger, publish the image
//	commands.go   one handler per command: validation and changes
//	image.go      Image copy-on-write, Digest, the publishing holder
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
// # Goroutines and locks
//
// Raft owns its goroutines; Close shuts raft down first, which resolves every
// pending future. The Node owns the leader loop (proposes InitCluster when it
// leads a cluster without id) and one waiter per Apply in flight; Close
// cancels and waits for them. Node.mu guards only the closing flag while a
// goroutine is added. The FSM is called by raft from one goroutine; images
// are published through an atomic pointer, so readers take no lock.
package raftfsm
