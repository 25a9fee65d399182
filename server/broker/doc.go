// Package broker is runnel's data plane: the partition replicas a node
// hosts, following the metadata image (raftfsm.Image) it is given.
//
// It hosts the partitions placed on this node (reconcile, the one image
// apply), deletes those of deleted topics and replicas moved away, and
// serves both front doors. The image reconcile applied last is the truth
// about the partitions placed here: a Partition is made from it only at
// its first use, or at reconcile for a replica this broker follows
// (hosting.go), and its log is opened, or created, only at its first use
// (lazylog.go): hosting a million partitions, or restarting with them,
// makes few Partitions and opens no log, and creating topics does no
// filesystem call under Broker.mu. A log is the directory
// <data-dir>/partitions/<topic>-<index>, which records its topic's id in
// an extended attribute (an empty topic-id- file where the filesystem has
// none), so an older topic's directory of the same name is replaced: a new
// partition costs two inodes, its directory and its segment (logdir.go
// says why there, and how older data dirs open). The front doors: produce (Partition.Produce, ProduceKeyed:
// acks 0, 1 or all; WriteTxnMarker for transaction markers), reads
// (Partition.Read, ReadCommitted, ReadDecoded, ReadBatches; Broker.ReadRecords
// long-polls; a chunk the Kafka door holds until its answer is written
// pins its segment file unless it is small enough to be copied out,
// smallread.go), wait-replicated (the waits acks=all returns) and notify
// (Partition.Changed: closed when the log or high watermark moves; the
// same wake calls the watches of the fetch sessions holding the partition,
// Partition.Watch, so a session's fetch reads only partitions with news).
// Replication is leader-driven by the followers: each follower fetches
// from its leader over the inter-broker Kafka port (fetcher.go, with the
// client of the leaf subpackage kafkaconn) in a KIP-227 fetch session that
// lists only partitions whose position changed (fetchsession.go), and a
// fetch round looks only at the partitions that changed since the last
// one: each followed partition's wake also tells its fetcher
// (Partition.follower, leaderFetcher.touch), so an idle follower's round
// costs nothing per partition it follows (fetcher.go); the
// leader tracks their log end offsets, advances the high watermark over the
// ISR (replication.go) and proposes ISR changes to the controller (isrLoop,
// one command per topic). A partition a follower's session holds but its
// fetch does not read (idle) counts as fetched at the session's position
// each time the session fetches (the watch's clock, wantedISR).
// Subpackages hold what needs no partition, or
// reaches one through a narrow interface: producers (the producer table of
// idempotent and transactional producers and the index of HTTP
// idempotency keys, which a partition checks and records each append
// against under its appendMu: producerstate.go, idemkeys.go), producerlog
// (their rebuild from the partition's log, the key index's load
// outside appendMu, and the replay of each batch a follower copies, so a
// new leader has them at once), storage (the disk reserve, the storage error, the
// health the doors report and the recovery loop of failed logs, which
// storage.go feeds the failed partitions), topicconfig (the topic config
// table, which the doors and server/admin use as well), readbuf (the
// pool of buffers HTTP reads load batches into) and replfetch (a
// follower fetcher's set of followed and changed partitions and its side
// of the leader's fetch session, keyed by Partition). A door
// reads a partition only through its methods (Topic, Index, Offsets,
// LogStart, Read..., Produce...), never its fields or its log.
//
// The broker reaches the rest of the node only through Config (dial a leader,
// the broker lease, policies) and Metadata (image, propose, catch up), so
// its logic is tested in-process with a fake Metadata
// (replication_isr_test.go: high watermark, ISR, acks=all;
// broker_reconcile_test.go, replication_epochs_test.go,
// producerstate_test.go, ...). Errors are this package's sentinels
// (ErrNotLeader, ErrNotEnoughReplicas, ErrStorage, ...); each door
// translates them in its one table (server/httpdoor/backend.go,
// server/kafkadoor/backend.go).
//
// Goroutines, started by Broker.Start and stopped by Broker.Close: run
// (follows the metadata image, runs log maintenance: each round the logs
// changed since their last one and those whose next due time came, kept
// in a heap of due times, duequeue.go, maintenance.go; Close ends a round
// between two logs), isrLoop (ISR changes
// of the partitions led here; a round asks only those queued to be asked,
// after new metadata or a fetch that may bring a follower back, and
// those whose check came due, kept in a heap of due times: Partition.isrDue,
// duequeue.go, isrchanges.go), storageLoop (runs storage.Recovery:
// reports and recovers failed logs: a log lists itself among the failed
// ones when it fails, segments.Options.OnFail, storage.go), the fetch manager's one goroutine per
// leader followed (leaderFetcher.run; stopped by Close or when no
// partition follows that leader any more) and, while it checks more
// partitions against that leader's epochs than one request asks about,
// one more asking them on a connection of its own (fetchepochs.go; ends
// when answered, or at Close), hwmCheckpointLoop (writes the
// one high-watermark checkpoint of the partitions directory every
// --high-watermark-checkpoint-interval when a mark moved: hwmcheckpoint.go,
// over the leaf codec hwcheckpoint), its pool of at most
// replicaApplyWorkers goroutines applying what they fetched and listing
// the directories of unopened logs, and its pool of at most
// replicaOpenWorkers opening those with records (the fetch loop itself
// touches no disk; fetchapply.go; each ends when its pool's queue is
// empty, and at Close), one more rebuilding the producer tables of followed partitions
// whose logs hold batches the table never saw (producerrebuild.go; same
// lifetime), and up to four deletion workers of the dirdelete queue, started when reconcile queues the logs of deleted replicas and
// ending when the queue is empty (deletions.go; Close waits for them).
// Close then closes the open logs together (segments.CloseAll, up to 16
// goroutines of its own, waited on): one to three syncs of the filesystem
// in all where it has them (vfs.FSSyncer, a handle New opens on the
// partitions directory), instead of a dozen fsyncs a log; a log with a
// small tail past its saved recovery point gets no file written (its next
// open rescans the tail). Then one write of the high-watermark checkpoint
// holds every log's mark.
//
// Lock order: Broker.mu, then the deletion queue's mu (a leaf), or a
// partition's lazyLog.mu (opening, closing, deleting its log), then the
// high-watermark checkpoint's writeMu (held across its write; no hot path
// takes it), then its appendMu, then its replica set (repl.mu), then its notifyMu, then its
// watchers' lock, then a watching fetch session's queue, or the set of
// the fetcher following it (replfetch.Changes' lock, a leaf); the set of
// queued producer rebuilds' lock is a leaf taken with no other; the disk
// reserve's lock (storage.Guard, taken by an append's admit), the
// storage health's, the checkpoint's marksMu (its table of marks and the
// list of those that moved) and the locks of the sets of open, changed and
// failed logs (openlogs.go: a walk holds one only to copy a chunk) and
// the due queues' (duequeue.go) are leaves, taken last (the failed set's also under a log's own lock, by
// the log's OnFail). No lock is
// held across a wait for replication or new data, and reconcile, which
// holds Broker.mu for writing, touches no disk: it opens and creates no
// log, and queues the deletion of a deleted replica's log for the
// deletion workers, which take that partition's lazyLog.mu without
// Broker.mu.
package broker
