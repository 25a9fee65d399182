package server

import (
	"context"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/txn"
)

// The broker's data plane is package server/broker; this file is what the
// server adds around it: the inter-broker Kafka calls the broker serves.

// CatchUpMetadata implements kafkaproto.MetadataCatchUp.
func (k *kafkaBackend) CatchUpMetadata(ctx context.Context) bool {
	return broker.CatchUpOnMiss(ctx, k.s.meta)
}

// WriteTxnMarker serves WriteTxnMarkers (API 27) from the inter-broker
// port: a marker from the transaction coordinator of another broker
// (writeTxnMarker, txnbackend.go: __consumer_offsets partitions complete
// the offsets staged by TxnOffsetCommit, others get a control batch).
func (k *kafkaBackend) WriteTxnMarker(ctx context.Context, topic string, partition int32, m kafkaproto.TxnMarker) error {
	return toKafkaError(k.s.writeTxnMarker(ctx, txn.Marker{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch,
		Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, kafkaproto.TopicPartition{Topic: topic, Partition: partition}))
}
