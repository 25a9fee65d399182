package kafkaproto

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// WriteTxnMarkers, key 27: versions 0-1 (flexible from 1). Inter-broker
// only: a transaction coordinator asks the leaders of a transaction's
// partitions to write its commit or abort marker. On the client door every
// partition is answered CLUSTER_AUTHORIZATION_FAILED (Kafka requires
// ClusterAction, which only brokers hold), so no client can end another
// producer's transaction or forge markers. Partitions are written
// concurrently, at most produceParallelism at a time; each write waits for
// the in-sync replicas (acks=all) or the connection's context. A Broker
// without TxnMarkerWriter answers INVALID_REQUEST.
const (
	writeTxnMarkersKey = 27
	writeTxnMarkersMin = 0
	writeTxnMarkersMax = 1
)

func (s *Server) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	if st, _ := ctx.Value(connStateKey{}).(*connState); st == nil || st.door != peerDoor {
		s.refused.Warn("WriteTxnMarkers on the client port refused")
		return writeTxnMarkersError(req, kapi.KafkaErr(ErrMarkerNotAuthorized))
	}
	w, ok := s.broker.(TxnMarkerWriter)
	if !ok {
		return writeTxnMarkersError(req, kerr.InvalidRequest.Code)
	}
	resp := writeTxnMarkersError(req, 0)
	var wg sync.WaitGroup
	sem := make(chan struct{}, produceParallelism)
	for i, rm := range req.Markers {
		m := TxnMarker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch,
			CoordinatorEpoch: rm.CoordinatorEpoch, Commit: rm.Committed}
		for j, rt := range rm.Topics {
			for k, idx := range rt.Partitions {
				p := &resp.Markers[i].Topics[j].Partitions[k]
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					p.ErrorCode = kapi.KafkaErr(w.WriteTxnMarker(ctx, rt.Topic, idx, m))
				}()
			}
		}
	}
	wg.Wait()
	return resp
}

// writeTxnMarkersError mirrors the request with code in every partition.
func writeTxnMarkersError(req *kmsg.WriteTxnMarkersRequest, code int16) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range req.Markers {
		m := kmsg.NewWriteTxnMarkersResponseMarker()
		m.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			t := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			t.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				p := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				p.Partition, p.ErrorCode = idx, code
				t.Partitions = append(t.Partitions, p)
			}
			m.Topics = append(m.Topics, t)
		}
		resp.Markers = append(resp.Markers, m)
	}
	return resp
}
