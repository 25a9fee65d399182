// Package raftfsm is runnel's metadata state machine: the cluster metadata
// (cluster id, brokers, topics and their partitions, producer id blocks,
// users, ACLs, API tokens, quotas) as commands applied to badger, with an
// immutable in-memory Image for the hot path. It imports no other project
// package: the raft node that runs it on the inter-node port, forwards
// commands to the leader and keeps broker sessions is package
// raftfsm/quorum.
//
// # Using it
//
// Package quorum opens the state store (OpenBadger), loads it (NewFSM) and
// hands the FSM to raft, which calls ApplyBatch, Snapshot and Restore. A
// proposer builds a Command (one typed field set), may Check it early and
// EncodeCommand it for the log; what needs randomness or the current
// cluster view (topic ids, replica placement with PlaceReplicas, the
// cluster id) is decided before proposing. Everyone else reads Images:
// Image returns a channel closed when a newer image is published, so
// readers can wait for changes without polling.
//
// # Files
//
//	api.go        errors, the model (Image, Broker, Topic, Partition), the
//	              commands and a node's view of the quorum (Server, Status)
//	limits.go     hard bounds the FSM applies to every command,
//	              ValidateTopicName, Limits (checked by the active
//	              controller before proposing) and ImageLoad
//	command.go    the command envelopes (JSON; binary for the batched
//	              leader moves), command versions and their rules, checks
//	fsm.go        the raft.FSM: decode, skip applied indexes, one switch,
//	              commit to badger, publish the image
//	commands.go   one handler per command: validation and changes
//	reassign.go   ReassignPartition: starting, completing and cancelling a
//	              partition reassignment
//	users.go, acls.go, tokens.go  the security commands: SCRAM credentials
//	              (UpsertUserScram, DeleteUser), ACL entries (CreateACLs,
//	              DeleteACLs) and API token hashes (CreateToken, DeleteToken);
//	              secrets are derived or drawn by the node before proposing
//	quotas.go     client quotas by entity (SetQuotas)
//	image.go      Image copy-on-write, Digest, the publishing holder
//	topicmap.go   TopicMap: the topics as a persistent radix tree (hashicorp's
//	              go-immutable-radix), so a batch costs O(change), not O(topics)
//	topicchanges.go  which topics changed between two images
//	topicbinary.go   a topic's binary stored form (command version 2)
//	load.go       the partitions and replicas per broker, kept in every image
//	state.go      badger layout of the state machine, loading an image
//	snapshot.go   snapshot format, Persist and Restore (streamed into
//	              badger record by record)
//	placement.go  replica placement for CreateTopic/CreatePartitions
//	badger.go     badger options (the state store and quorum's raft log)
//	diskroom.go   StateDiskFloor: badger writes through memory-mapped
//	              files (a full disk is SIGBUS), so it is not opened or
//	              written below that much free space
//	failstop.go   a failed write of the state store stops the state
//	              machine: the batch is answered with the failure, nothing
//	              applies after it, Failed closes (quorum stops the node);
//	              badger is closed only when its close has room to write
//	flushwatch.go a memtable flush failing on badger's goroutine (retried
//	              for ever, seen only in its log) stops it the same way
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
// (topic ids, replica placement, the cluster id) is decided before proposing,
// and nothing at apply depends on the node's configuration.
//
// # Versions and rolling upgrades
//
// Every command carries a version (command.go has the rules). A proposer
// writes the lowest version that expresses a command, and nothing above
// the cluster's version (Image.CommandVersion), which the active
// controller raises only once every node reports it applies the new one;
// what a newer version stores (binary topics) is likewise written only
// from then on. A node that meets a command it does not understand (a
// newer version, a field or kind it does not know) stops with a panic
// naming the index, never skips it or drops the unknown part: skipping
// would leave its metadata silently different from its peers'. A state
// store written by a newer version refuses to load.
//
// # Untrusted commands
//
// The log is input like any other: DecodeCommand checks every command
// against hard bounds and Kafka's topic-name rules (limits.go) before the
// FSM applies it, so no command can name a path or drive an unbounded
// allocation.
//
// # Goroutines and locks
//
// None of its own. The FSM is called by raft from one goroutine; images
// are published through an atomic pointer, so readers take no lock. A
// failed flush is reported on badger's flush goroutine (flushWatch's
// mutex, then the stop's sync.Once; nothing else is locked).
package raftfsm
