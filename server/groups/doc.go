// Package groups is the consumer group coordinator: one coordinator for
// Kafka clients and HTTP consumers, built on a small Backend (the metadata
// image, appends to and reads of partitions, the lag metrics) rather than on
// the server, so its logic is tested in-process with a fake Backend.
//
// Files: coordinator.go (lifecycle, leadership of the offsets topic, group
// lookup), state.go (group state, JoinGroup and the rebalance), sync.go
// (SyncGroup, heartbeats, leaving, session and rebalance timers), store.go
// (records in __consumer_offsets: encoding, appends, load), offsets.go
// (commit, fetch, delete, describe), kafka.go (the Kafka door's group APIs),
// http.go and httpmember.go (the HTTP door's: admin, lag, HTTP members),
// assign.go (the server-side range assignor for HTTP leaders), lag.go (the
// lag sampler), writes.go (each group's queue of records to append),
// backend.go (Config, Backend and Log: what it needs from the broker). The server wires it (server/coordinators/groups.go) and translates its
// errors for each door (server/kafkadoor/groups.go,
// server/httpdoor/groups.go, which also proxies a group's HTTP requests to
// its coordinator).
//
// The coordinator of group g is the leader of partition
// abs(javaHash(g)) % n of __consumer_offsets. Each node's coordinator
// follows the metadata image: when it becomes the leader of an offsets
// partition it loads the groups of that partition by scanning it from the
// start, and answers COORDINATOR_LOAD_IN_PROGRESS for them meanwhile; when
// it stops leading one it drops those groups (NOT_COORDINATOR), failing
// any pending joins and syncs. Offsets and group metadata are appended to
// the partition like any data (the partition's acks=all path), never
// proposed to Raft.
//
// Goroutines: run (leadership follower and loads, session and rebalance
// timers, lag sampler) is started by Start and stopped by Close. Each group
// with records to append has at most one flusher goroutine (writes.go),
// started when its queue fills and ending when it is empty; Close cancels
// their appends and waits for them. JoinGroup, SyncGroup and commit callers
// wait on channels, without locks. Loads wait for the partition's high
// watermark (woken by it, up to 5 s) and end when Close or the request
// that triggered them does.
//
// Lock order: Coordinator.loadMu, then Coordinator.mu, then group.mu, then
// Coordinator.flushMu. No lock is held while calling the Backend's Append or
// Read (an acks=all append waits for the replicas): a group's records are
// queued under group.mu, so the log order of its records is the order of
// its in-memory changes, written by its flusher without the lock, and
// applied to memory (offsets) or completing a generation (SyncGroup) once
// written. A failed metadata write is retried at the next tick with the
// group's current state, so the log does not stay behind memory.
package groups
