package server_test

import (
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// The group list shows the same lag as the group's own page right after a
// commit and right after a restart, not a sample from before them.
func TestGroupListLagAgreesWithDescribe(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "lagged", "partitions": 2}, 201, nil)
	for i := range 40 {
		c.json("POST", "/v1/topics/lagged/records", map[string]any{"records": []map[string]any{
			{"value": i, "partition": i % 2}}}, 200, nil)
	}
	type listed = api.GroupList
	check := func(when string, want int64) {
		t.Helper()
		var d api.GroupDetail
		c.json("GET", "/v1/groups/billing", nil, 200, &d)
		var l listed
		c.json("GET", "/v1/groups", nil, 200, &l)
		if len(l.Groups) != 1 || l.Groups[0].Lag != d.Lag || d.Lag != want {
			t.Fatalf("%s: list %+v, describe lag %d, want %d in both", when, l.Groups, d.Lag, want)
		}
	}
	commit := func(off0, off1 int) {
		c.json("POST", "/v1/groups/billing/offsets", map[string]any{"offsets": []map[string]any{
			{"topic": "lagged", "partition": 0, "offset": off0}, {"topic": "lagged", "partition": 1, "offset": off1}}}, 200, nil)
	}
	commit(5, 5)
	check("after the first commit", 30)
	commit(15, 10)
	check("after a second commit", 15)
	n.Stop()
	n.Start()
	c = newAPIClient(t, n)
	servertest.WaitFor(t, 20*time.Second, "the group back after the restart", func() bool {
		status, _ := c.do("GET", "/v1/groups/billing", "", nil)
		return status == 200
	})
	check("right after a restart", 15)
}
