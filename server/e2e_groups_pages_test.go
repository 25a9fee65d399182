package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// GET /v1/groups pages through the groups of every coordinator: each broker
// answers its own page and the node asked merges them, so walking the pages
// from any node gives every group once, in order.
func TestGroupListPagesAcrossBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	cl := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	c := newAPIClient(t, cl.Nodes[0])
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "gpages", "partitions": 1, "replication_factor": 1}, http.StatusCreated, nil)
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("gp-%02d", i)
		commit := map[string]any{"offsets": []map[string]any{{"topic": "gpages", "partition": 0, "offset": 0}}}
		c.json(http.MethodPost, "/v1/groups/"+name+"/offsets", commit, http.StatusOK, nil)
		want = append(want, name)
	}
	other := newAPIClient(t, cl.Nodes[1])
	coordinators := map[int32]bool{}
	for _, limit := range []int{1, 5, 12, 1000} {
		var got []string
		q := url.Values{"prefix": {"gp-"}, "limit": {fmt.Sprint(limit)}}
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("limit %d: more than 20 pages", limit)
			}
			status, body := other.do(http.MethodGet, "/v1/groups?"+q.Encode(), "", nil)
			var gl api.GroupList
			if status != http.StatusOK || json.Unmarshal(body, &gl) != nil {
				t.Fatalf("GET /v1/groups?%s: %d %s", q.Encode(), status, body)
			}
			if len(gl.Groups) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(gl.Groups))
			}
			for _, g := range gl.Groups {
				got = append(got, g.Group)
				coordinators[g.Coordinator] = true
			}
			if gl.NextCursor == "" {
				break
			}
			q.Set("cursor", gl.NextCursor)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: walked %v, want %v", limit, got, want)
		}
	}
	if len(coordinators) < 2 {
		t.Fatalf("all groups on one coordinator %v: the merge of pages was not exercised", coordinators)
	}
}
