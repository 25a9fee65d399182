// Package storage is the data plane's side of a disk that stops taking
// writes: the reserve kept free for the metadata store (Guard, checked by
// every append), the error clients see when a partition's log refuses
// writes (ErrStorage, PartitionErr), what the node reports about it
// (Health: the /healthz and Kafka doors read it), and the recovery loop
// that brings failed logs back in place once the disk takes writes again
// (Recovery).
//
// It knows the broker's partitions only through a narrow interface: the
// Recovery's Failed function lists the replicas whose log failed, each a
// Replica (its name, its log's sticky error, Recover). So the loop's
// decisions (back off while the disk stays full, start each round at
// another replica, report what failed) are tested in-process with fakes
// (recovery_test.go), and the reserve with a fake statfs (guard_test.go).
//
// Goroutines: none of its own; the broker runs Recovery.Run on its
// storage loop goroutine (broker.Broker.storageLoop), started by Start and
// stopped by Close through the context.
//
// Locks: Guard.mu serialises statfs measures (admits read atomics and
// take it only to measure or describe the refusal); Health.mu guards what
// the loop last published. Neither is held while another is taken, and
// Recovery holds neither across a Recover (disk I/O).
package storage
