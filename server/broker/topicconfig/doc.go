// Package topicconfig is the table of topic configs runnel accepts: their
// Kafka types, defaults, bounds and documentation (topicconfig.go: the
// ones runnel honours; kafka.go: the rest of Kafka's set, accepted,
// stored and described read-only), their validation (ErrInvalid), the
// effective value of a topic's config, the synonyms DescribeConfigs
// reports, and LogConfig, the segments.Config a topic's configs make.
//
// Both doors and server/admin validate and describe through it; the
// broker applies it to its partitions. It holds no mutable state (the
// table is built and sorted once) and starts no goroutine: every function
// is safe for concurrent use.
package topicconfig
