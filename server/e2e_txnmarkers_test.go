package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// markerRecord is a consumed record as the marker tests read it.
type markerRecord struct {
	Offset        int64              `json:"offset"`
	Value         *string            `json:"value"`
	Transactional bool               `json:"transactional"`
	Control       *api.ControlMarker `json:"control"`
}

// String is "offset:value", or "offset:commit" / "offset:abort" for a marker.
func (r markerRecord) String() string {
	switch {
	case r.Control != nil:
		return fmt.Sprintf("%d:%s", r.Offset, r.Control.Type)
	case r.Value == nil:
		return fmt.Sprintf("%d:null", r.Offset)
	}
	return fmt.Sprintf("%d:%s", r.Offset, *r.Value)
}

// Commit and abort markers over HTTP: with isolation=read_uncommitted and
// include_control=true a partition read returns each marker at its offset
// with its type and producer, on every read path: the leader's own read
// (records handed out one at a time, ConsumeEach), a read on a node that
// does not lead the partition (forwarded to the leader), and the SSE
// stream (records collected per read, Consume) on both nodes. Pages of one
// record step through markers like records. Without include_control the
// markers' offsets are skipped as before; read_committed never shows them
// and refuses include_control=true.
func TestTxnMarkersOverHTTP(t *testing.T) {
	cl := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 1, Brokers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newAPIClient(t, cl.Node(1))
	c.json("POST", "/v1/topics", map[string]any{"name": "txm", "partitions": 1, "replication_factor": 1}, 201, nil)
	var td api.TopicDetail
	c.json("GET", "/v1/topics/txm", nil, 200, &td)
	leaderID := int(td.Partitions[0].Leader)
	leader, other := cl.Node(leaderID), cl.Node(3-leaderID)

	tx, err := kgo.NewClient(kgo.SeedBrokers(leader.KafkaAddr, other.KafkaAddr), kgo.DefaultProduceTopic("txm"), kgo.TransactionalID("txm-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	runTxn(ctx, t, tx, true, "c1", "c2")
	runTxn(ctx, t, tx, false, "a1")
	c.json("POST", "/v1/topics/txm/records?encoding=string", map[string]any{"records": []map[string]any{{"value": "p1"}}}, 200, nil)

	withMarkers := []string{"0:c1", "1:c2", "2:commit", "3:a1", "4:abort", "5:p1"}
	uncommitted := []string{"0:c1", "1:c2", "3:a1", "5:p1"}
	committed := []string{"0:c1", "1:c2", "5:p1"}
	const base = "/v1/topics/txm/partitions/0/records?encoding=string"
	for _, id := range []int{leaderID, 3 - leaderID} {
		n := cl.Node(id)
		nc := newAPIClient(t, n)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"&isolation=read_uncommitted&include_control=true", withMarkers},
			{"&isolation=read_uncommitted&include_control=false", uncommitted},
			{"&isolation=read_uncommitted", uncommitted},
			{"", committed},
			{"&isolation=read_committed", committed},
		} {
			for _, page := range []int{100, 1} {
				recs := readMarkerPages(t, nc, base+tc.query, page)
				if got := markerStrings(recs); !slices.Equal(got, tc.want) {
					t.Fatalf("node %d%s, pages of %d: %v, want %v", id, tc.query, page, got, tc.want)
				}
				checkMarkers(t, recs)
			}
			recs := sseMarkers(ctx, t, n, "/v1/topics/txm/records/stream?offset=earliest&encoding=string"+tc.query, "p1")
			if got := markerStrings(recs); !slices.Equal(got, tc.want) {
				t.Fatalf("node %d SSE%s: %v, want %v", id, tc.query, got, tc.want)
			}
			checkMarkers(t, recs)
		}
		nc.problem("GET", base+"&include_control=true", "", nil, 400, "invalid-request")
		nc.problem("GET", base+"&isolation=read_committed&include_control=true", "", nil, 400, "invalid-request")
		nc.problem("GET", base+"&isolation=read_uncommitted&include_control=yes", "", nil, 400, "invalid-request")
	}
}

// readMarkerPages reads the partition from offset 0 to the high watermark
// in pages of page records.
func readMarkerPages(t *testing.T, c *apiClient, path string, page int) []markerRecord {
	t.Helper()
	var out []markerRecord
	next := int64(0)
	for range 20 {
		var res struct {
			Records       []markerRecord `json:"records"`
			NextOffset    int64          `json:"next_offset"`
			HighWatermark int64          `json:"high_watermark"`
		}
		c.json("GET", fmt.Sprintf("%s&offset=%d&max_records=%d", path, next, page), nil, 200, &res)
		if len(res.Records) > page {
			t.Fatalf("%s: %d records in a page of %d", path, len(res.Records), page)
		}
		out = append(out, res.Records...)
		if len(res.Records) == 0 || res.NextOffset == next {
			return out
		}
		next = res.NextOffset
	}
	t.Fatalf("%s: no end after 20 pages: %v", path, markerStrings(out))
	return nil
}

func markerStrings(recs []markerRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.String()
	}
	return out
}

// checkMarkers: markers are transactional, carry no value, and both name
// the one producer with a valid epoch.
func checkMarkers(t *testing.T, recs []markerRecord) {
	t.Helper()
	pid := int64(-1)
	for _, r := range recs {
		if r.Control == nil {
			continue
		}
		if !r.Transactional || r.Value != nil || r.Control.ProducerID < 0 || r.Control.ProducerEpoch < 0 || r.Control.CoordinatorEpoch < 0 {
			b, _ := json.Marshal(r)
			t.Fatalf("marker %s", b)
		}
		if pid >= 0 && r.Control.ProducerID != pid {
			t.Fatalf("markers of producers %d and %d, want one", pid, r.Control.ProducerID)
		}
		pid = r.Control.ProducerID
	}
}

// sseMarkers reads the SSE stream at path until the record with value last.
func sseMarkers(ctx context.Context, t *testing.T, n *servertest.Node, path, last string) []markerRecord {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", n.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("SSE %s: status %d", path, resp.StatusCode)
	}
	var out []markerRecord
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var rec markerRecord
		if err := json.Unmarshal([]byte(data), &rec); err != nil {
			t.Fatalf("SSE data %q: %v", data, err)
		}
		if out = append(out, rec); rec.Value != nil && *rec.Value == last {
			return out
		}
	}
	t.Fatalf("SSE ended after %v: %v", markerStrings(out), sc.Err())
	return nil
}
