package quorum_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// BenchmarkControllerBrokerKill is the controller's part of a broker's
// kill -9 (issue 19's goal: every partition led again within the session
// timeout + 5 s), without partition logs: three voters and three
// broker-only nodes in one process, the default heartbeat interval and
// session timeout (2 s, 9 s), topics of up to 1,000 partitions with
// replication factor 3 (BenchmarkClusterScale's shape) up to
// scalePartitions. One broker-only node is crashed (its connections end,
// its port refuses, as after a kill -9); it reports the seconds until
// the active controller's image shows it fenced, and until no partition
// is led by it.
func BenchmarkControllerBrokerKill(b *testing.B) {
	total := scalePartitions(b)
	for range b.N {
		runBrokerKill(b, total)
	}
}

func runBrokerKill(b *testing.B, total int) {
	q := newQuorum(b, 3, 3, func(c *quorum.Config) {
		c.HeartbeatInterval, c.SessionTimeout = 0, 0 // the defaults
		c.SnapshotThreshold = 1 << 20
		c.SnapshotInterval = time.Hour
	})
	defer func() {
		for i := range q.nodes {
			q.stop(i)
		}
	}()
	q.waitReady()
	for i := 3; i < 6; i++ {
		q.register(i, "")
	}
	const perTopic = 1000
	for made, t := 0, 0; made < total; t++ {
		n := min(perTopic, total-made)
		q.applyOn(0, createTopic(fmt.Sprintf("kill-%05d", t), int32(n), 3))
		made += n
	}
	victim := 3
	id := q.cfgs[victim].NodeID
	watcher := q.nodes[q.leader()]
	led := func(img *raftfsm.Image) int {
		count := 0
		for _, t := range img.Topics.All() {
			for _, p := range t.Partitions {
				if p.Leader == id || p.Leader == -1 {
					count++
				}
			}
		}
		return count
	}
	img, _ := watcher.Image()
	b.ReportMetric(float64(led(img)), "victim_led")

	start := time.Now()
	q.crash(victim)
	var fenced time.Duration
	deadline := time.After(5 * time.Minute)
	for {
		img, changed := watcher.Image()
		if fenced == 0 && img.Brokers[id].State == raftfsm.BrokerFenced {
			fenced = time.Since(start)
		}
		if fenced != 0 && led(img) == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("broker %d still leads %d partitions 5 minutes after its crash", id, led(img))
		}
	}
	b.ReportMetric(float64(total), "partitions")
	b.ReportMetric(fenced.Seconds(), "fenced_s")
	b.ReportMetric(time.Since(start).Seconds(), "led_again_s")
	q.uncrash(victim)
}
