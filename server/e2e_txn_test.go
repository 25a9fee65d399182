package server_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/servertest"
)

// Transaction markers come only from brokers: a client's control batch is
// INVALID_RECORD and WriteTxnMarkers on the client port is
// CLUSTER_AUTHORIZATION_FAILED; neither writes anything.
func TestTxnMarkersRefusedFromClients(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "tx", "partitions": 1}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)

	marker := segments.BuildControlBatch(segments.Marker{ProducerID: 1, ProducerEpoch: 0, Type: segments.ControlAbort}, time.Now().UnixMilli())
	if r := rawProduce(t, conn, "tx", marker); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("client control batch: %v, want INVALID_RECORD", kerr.ErrorForCode(r.ErrorCode))
	}

	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed = 1, true
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = "tx", []int32{0}
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	resp := rawRoundTrip(t, conn, req).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers on the client port: %v", kerr.ErrorForCode(code))
	}
	if end := httpEndOffset(t, n, "tx", 0); end != 0 {
		t.Fatalf("end offset %d after refused markers, want 0", end)
	}
}
