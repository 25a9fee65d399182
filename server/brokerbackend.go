package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/txn"
)

// The broker's data plane is package server/broker; this file is what the
// server adds around it: reassignment proposed to the controller, metadata
// look-ups that catch up first, and the inter-broker Kafka calls the broker
// serves.

// startReassignment proposes a partition's new replica set.
func (s *Server) startReassignment(ctx context.Context, topic string, idx int32, target []int32) error {
	return s.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx,
		Action: raftfsm.ReassignStart, Target: slices.Clone(target)})
}

// cancelReassignment reverts a running reassignment.
func (s *Server) cancelReassignment(ctx context.Context, topic string, idx int32) error {
	return s.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx, Action: raftfsm.ReassignCancel})
}

func (s *Server) reassign(ctx context.Context, cmd *raftfsm.ReassignPartition) error {
	if _, err := s.applyMeta(ctx, raftfsm.Command{ReassignPartition: cmd}); err != nil {
		return fmt.Errorf("%s reassignment of %s-%d: %w", cmd.Action, cmd.Topic, cmd.Partition, err)
	}
	return nil
}

// lookupTopic finds a topic in this node's metadata image, catching up with
// the active controller first when it is not there.
func (s *Server) lookupTopic(ctx context.Context, name string) (*raftfsm.Image, *raftfsm.Topic, bool) {
	img, _ := s.meta.Image()
	if t, ok := img.Topics.Lookup(name); ok {
		return img, t, true
	}
	if !broker.CatchUpOnMiss(ctx, s.meta) {
		return img, nil, false
	}
	img, _ = s.meta.Image()
	t, ok := img.Topics.Lookup(name)
	return img, t, ok
}

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
