package server_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// A partition of GET /v1/topics/{topic} (the api package's shapes).
type (
	reassignView  = api.PartitionDetail
	reassignTopic = api.TopicDetail
)

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// reassignPlan creates an RF=3 topic on a cluster of four brokers and
// returns its replicas and the broker that holds none.
func reassignPlan(t *testing.T, c *servertest.Cluster, topic string) (replicas []int32, spare int32) {
	t.Helper()
	createReplicatedTopic(t, c.Node(1), topic)
	ps, _ := describe(c.Node(1), topic)
	replicas = ps[0].Replicas
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(replicas, id) {
			spare = id
		}
	}
	return replicas, spare
}

// A partition moves from brokers {a,b,c} to {b,c,d} while acks=all writes
// go on: afterwards every acknowledged record is there, d's copy is
// byte-identical to b's up to the high watermark, a deleted its copy, and
// the ISR is the target.
func TestReassignmentMovesReplicasOnline(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Brokers: 1, Args: append(fastSessions, "--replica-lag-time-max", "3s")})
	replicas, d := reassignPlan(t, c, "moving")
	a, b := replicas[0], replicas[1]
	target := []int32{replicas[1], replicas[2], d}
	t.Logf("moving %v to %v", replicas, target)

	acked := map[int64]string{}
	var ackTimes []time.Time
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				if off, ok := produceOne(c.Nodes[(w+i)%4], "moving", v, 5*time.Second); ok {
					mu.Lock()
					acked[off] = v
					ackTimes = append(ackTimes, time.Now())
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)

	api := newAPIClient(t, c.Node(int(b)))
	startedAt := time.Now()
	var started reassignTopic
	api.json("PUT", "/v1/topics/moving/partitions/0/replicas", map[string]any{"replicas": target}, 202, &started)
	t.Logf("started: %+v", started.Partitions[0])
	var done reassignView
	servertest.WaitFor(t, 60*time.Second, "the reassignment to complete", func() bool {
		var td reassignTopic
		api.json("GET", "/v1/topics/moving", nil, 200, &td)
		done = td.Partitions[0]
		return slices.Equal(done.Replicas, target) && len(done.AddingReplicas) == 0 && len(done.RemovingReplicas) == 0
	})
	doneAt := time.Now()
	time.Sleep(300 * time.Millisecond) // a few more writes on the new replica set
	close(stop)
	wg.Wait()
	before, during := ackRate(ackTimes, ackTimes[0], startedAt), ackRate(ackTimes, startedAt, doneAt)
	t.Logf("move took %v; acks=all writes/s before %.0f, during %.0f (ratio %.2f)",
		doneAt.Sub(startedAt).Round(time.Millisecond), before, during, during/before)

	if !slices.Equal(sortedIDs(done.ISR), sortedIDs(target)) {
		t.Fatalf("isr %v after the move, want %v", done.ISR, target)
	}
	if done.Leader == a {
		t.Fatalf("leader still %d, a removed replica", a)
	}
	aDir := filepath.Join(c.Node(int(a)).DataDir, "partitions", "moving-0")
	servertest.WaitFor(t, 30*time.Second, "the removed replica's directory to go", func() bool {
		_, err := os.Stat(aDir)
		return os.IsNotExist(err)
	})
	got := readAll(t, c.Node(int(d)), "moving")
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("acknowledged %q at offset %d, found %q", v, off, got[off])
		}
	}
	var final reassignTopic
	api.json("GET", "/v1/topics/moving", nil, 200, &final)
	hw := final.Partitions[0].HighWatermark
	for _, n := range c.Nodes {
		n.Stop()
	}
	want := replicaBytes(t, c.Node(int(b)), "moving", hw)
	if got := replicaBytes(t, c.Node(int(d)), "moving", hw); !bytes.Equal(got, want) {
		t.Fatalf("new replica %d differs from %d below the high watermark %d (%d vs %d bytes)", d, b, hw, len(got), len(want))
	}
	if len(acked) == 0 || hw == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d acknowledged records, replicas %v identical up to %d", len(acked), target, hw)
}

// A reassignment whose new replica cannot catch up (its broker is down)
// stays pending with adding/removing replicas shown; cancelling it puts the
// partition back on its replicas, and the new broker hosts nothing. Bad
// requests are refused.
func TestReassignmentCancel(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Brokers: 1, Args: append(fastSessions, "--replica-lag-time-max", "3s")})
	replicas, d := reassignPlan(t, c, "staying")
	api := newAPIClient(t, c.Node(int(replicas[1])))
	path := "/v1/topics/staying/partitions/0/replicas"

	api.problem("PUT", path, "application/json", []byte(`{"replicas":[1,1,2]}`), 400, "invalid-request")
	api.problem("PUT", path, "application/json", []byte(`{"replicas":[1,2]}`), 400, "invalid-request")
	api.problem("PUT", path, "application/json", []byte(`{"replicas":[1,2,99]}`), 400, "invalid-request")
	api.problem("PUT", "/v1/topics/staying/partitions/5/replicas", "application/json", []byte(`{"replicas":[1,2,3]}`), 404, "unknown-partition")
	api.problem("DELETE", path, "", nil, 409, "conflict")

	c.Node(int(d)).Kill()
	target := []int32{d, replicas[1], replicas[2]}
	api.json("PUT", path, map[string]any{"replicas": target}, 202, nil)
	var td reassignTopic
	api.json("GET", "/v1/topics/staying", nil, 200, &td)
	p := td.Partitions[0]
	if !slices.Equal(p.Replicas, append(slices.Clone(target), replicas[0])) ||
		!slices.Equal(p.AddingReplicas, []int32{d}) || !slices.Equal(p.RemovingReplicas, []int32{replicas[0]}) {
		t.Fatalf("pending reassignment shows %+v", p)
	}
	if _, ok := produceOne(c.Node(int(replicas[1])), "staying", "during", 10*time.Second); !ok {
		t.Fatal("acks=all write refused while a reassignment is pending")
	}
	time.Sleep(time.Second)
	var still reassignTopic
	api.json("GET", "/v1/topics/staying", nil, 200, &still)
	if len(still.Partitions[0].AddingReplicas) == 0 {
		t.Fatalf("completed without the new replica: %+v", still.Partitions[0])
	}

	var cancelled reassignTopic // absent fields must not keep older values
	api.json("DELETE", path, nil, 200, &cancelled)
	p = cancelled.Partitions[0]
	if !slices.Equal(sortedIDs(p.Replicas), sortedIDs(replicas)) || len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 ||
		slices.Contains(p.ISR, d) {
		t.Fatalf("after cancel %+v, want replicas %v", p, replicas)
	}
	api.problem("DELETE", path, "", nil, 409, "conflict")

	c.Node(int(d)).Start()
	if _, ok := produceOne(c.Node(int(d)), "staying", "after", 10*time.Second); !ok {
		t.Fatal("write after the cancel refused")
	}
	if _, err := os.Stat(filepath.Join(c.Node(int(d)).DataDir, "partitions", "staying-0")); !os.IsNotExist(err) {
		t.Fatalf("broker %d hosts the partition after the cancel: %v", d, err)
	}
}

// ackRate is the number of acknowledgements per second in [from, to).
func ackRate(times []time.Time, from, to time.Time) float64 {
	n := 0
	for _, at := range times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}
