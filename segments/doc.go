// Package segments is one partition's log on disk: Kafka RecordBatch v2 bytes
// stored exactly as received, split into segment files, with sparse offset and
// time indexes, crash recovery, retention and compaction.
package segments
