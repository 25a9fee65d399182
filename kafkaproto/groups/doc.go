// Package groups serves the consumer group APIs of runnel's Kafka listener
// (the classic protocol): finding a group's or a transactional id's
// coordinator, membership (join, sync, heartbeat, leave), committed offsets
// (commit, fetch, delete) and the group listings. Each file is one API key,
// opening with the versions it serves; handlers.go lists them (Handlers),
// and the listener's table (kafkaproto/handlers.go) takes them in. A
// handler is a function of a kapi.Env (the listener: the Broker, the
// request's connection) and a decoded kmsg request; it reaches the group
// coordinator as the Broker's optional kapi.GroupCoordinator (without one
// the APIs answer COORDINATOR_NOT_AVAILABLE) and maps its errors with
// kapi.GroupErr.
//
// # Files
//
//	handlers.go   Handlers: the group API keys and versions; the coordinator lookup
//	<api>.go      one per API key: findcoordinator, joingroup, syncgroup, heartbeat,
//	              leavegroup, offsetcommit, offsetfetch, offsetdelete, listgroups,
//	              describegroups, deletegroups
//
// # Goroutines and locks
//
// None of its own: handlers run on the goroutine of the connection that
// calls them, hold no lock and keep no state between requests. JoinGroup
// and SyncGroup block in the coordinator until the rebalance lets them
// answer, bounded by the rebalance timeout or the listener's context. It
// imports only kafkaproto/kapi of the project.
package groups
