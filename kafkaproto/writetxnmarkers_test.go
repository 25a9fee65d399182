package kafkaproto

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// markerSpy records the markers the listener passes to the broker.
type markerSpy struct {
	*memBroker
	mu      sync.Mutex
	markers []TxnMarker
	parts   []string
}

func (b *markerSpy) WriteTxnMarker(_ context.Context, topic string, partition int32, m TxnMarker) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if topic == "fenced" {
		return ErrTransactionCoordinatorFenced
	}
	b.markers = append(b.markers, m)
	b.parts = append(b.parts, topic)
	return nil
}

func markersRequest(topics ...string) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 77, 3, true, 9
	for _, topic := range topics {
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, rt)
	}
	req.Markers = append(req.Markers, m)
	return req
}

// WriteTxnMarkers is inter-broker only: refused on the client door before
// the broker sees it, served on the peer door with every field passed on
// and each partition's error in its place.
func TestWriteTxnMarkersOnlyFromPeers(t *testing.T) {
	b := &markerSpy{memBroker: newMemBroker()}
	clientAddr, peerAddr := startDoors(t, b, Options{}, 2)
	client, peer := dialT(t, clientAddr), dialT(t, peerAddr)

	resp := roundTrip(t, client, markersRequest("t")).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("client door: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if len(b.markers) != 0 {
		t.Fatalf("a refused marker reached the broker: %+v", b.markers)
	}

	resp = roundTrip(t, peer, markersRequest("t", "fenced")).(*kmsg.WriteTxnMarkersResponse)
	m := resp.Markers[0]
	if m.ProducerID != 77 || len(m.Topics) != 2 {
		t.Fatalf("response %+v", m)
	}
	if code := m.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("peer door: %v", kerr.ErrorForCode(code))
	}
	if code := m.Topics[1].Partitions[0].ErrorCode; code != kerr.TransactionCoordinatorFenced.Code {
		t.Errorf("fenced partition: %v", kerr.ErrorForCode(code))
	}
	want := TxnMarker{ProducerID: 77, ProducerEpoch: 3, CoordinatorEpoch: 9, Commit: true}
	if len(b.markers) != 1 || b.markers[0] != want || b.parts[0] != "t" {
		t.Fatalf("broker saw %+v on %v, want %+v on t", b.markers, b.parts, want)
	}
}

// peerSweepKeys are the inter-broker-only keys, swept on the peer door.
var peerSweepKeys = []int16{writeTxnMarkersKey}

// Every version of WriteTxnMarkers decodes and is answered without error
// on the peer door.
func TestWriteTxnMarkersEveryVersion(t *testing.T) {
	b := &markerSpy{memBroker: newMemBroker()}
	_, peerAddr := startDoors(t, b, Options{}, 2)
	peer := dialT(t, peerAddr)
	for v := int16(writeTxnMarkersMin); v <= writeTxnMarkersMax; v++ {
		req := markersRequest("t")
		req.SetVersion(v)
		resp := roundTrip(t, peer, req)
		if codes := errorCodes(resp); len(codes) > 0 {
			t.Fatalf("v%d: error codes %v", v, codes)
		}
	}
}
