package server_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// Issue 18: once an admin call returns, every alive broker answers
// Metadata with the change: a created topic with all its partitions, a
// grown topic with its new count, a deleted topic gone. Raw Metadata
// requests go straight to each node (its seed connection) right after the
// call, for many rounds, asking both for all topics and by name.
func TestKafkaAdminChangesVisibleOnEveryBroker(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	adm, _, ctx := adminClient(t, c.Node(1).KafkaAddr)
	var seeds []*kgo.Broker
	for _, n := range c.Nodes {
		seeds = append(seeds, rawClient(t, n.KafkaAddr).SeedBrokers()[0])
	}
	// partitionsOn is the topic's partition count in node i's all-topics
	// and by-name answers (-1: not listed / unknown).
	partitionsOn := func(i int, topic string) (all, named int) {
		all, named = -1, -1
		for _, byName := range []bool{false, true} {
			req := kmsg.NewPtrMetadataRequest()
			if byName {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
			}
			resp, err := seeds[i].RetriableRequest(ctx, req)
			if err != nil {
				t.Fatalf("metadata from node %d: %v", i+1, err)
			}
			for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
				if mt.Topic == nil || *mt.Topic != topic || mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
					continue
				}
				n := len(mt.Partitions)
				for _, p := range mt.Partitions {
					if p.Leader < 0 {
						n = -2 // listed without a leader
					}
				}
				if byName {
					named = n
				} else {
					all = n
				}
			}
		}
		return all, named
	}
	expect := func(round int, what, topic string, want int) {
		t.Helper()
		for i := range seeds {
			if all, named := partitionsOn(i, topic); all != want || named != want {
				t.Fatalf("round %d, right after %s: node %d lists %s with %d partitions (all topics) / %d (by name), want %d",
					round, what, i+1, topic, all, named, want)
			}
		}
	}
	// produceToLeaders sends one record to each partition's leader as node
	// 1 names it, straight away: the leader must take it.
	produceToLeaders := func(round int, topic string, parts ...int32) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		resp, err := seeds[0].RetriableRequest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		md := resp.(*kmsg.MetadataResponse).Topics[0]
		for _, p := range parts {
			leader := md.Partitions[p].Leader
			pr := kmsg.NewPtrProduceRequest()
			pr.Acks, pr.TimeoutMillis = 1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, rawBatch(1, -1, -1, -1)
			rt.Partitions = append(rt.Partitions, rp)
			pr.Topics = append(pr.Topics, rt)
			resp, err := seeds[leader-1].RetriableRequest(ctx, pr)
			if err != nil {
				t.Fatal(err)
			}
			if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("round %d: produce to %s-%d on its leader %d right after CreatePartitions: %v", round, topic, p, leader, kerr.ErrorForCode(code))
			}
		}
	}
	for round := range 8 {
		topic := fmt.Sprintf("vis-%d", round)
		mustCreateKafkaTopic(t, adm, ctx, topic, 3, 3, nil)
		expect(round, "CreateTopics", topic, 3)
		if rs, err := adm.CreatePartitions(ctx, 2, topic); err != nil || rs[topic].Err != nil {
			t.Fatalf("create partitions: %v %+v", err, rs)
		}
		produceToLeaders(round, topic, 3, 4)
		expect(round, "CreatePartitions 3->5", topic, 5)
		if rs, err := adm.DeleteTopics(ctx, topic); err != nil || rs[topic].Err != nil {
			t.Fatalf("delete: %v %+v", err, rs)
		}
		expect(round, "DeleteTopics", topic, -1)
	}
}

// A broker that is alive but does not answer (paused) delays an admin call
// by at most --metadata-propagation-timeout: the change is committed, the
// call succeeds, and the node that served it logs which broker did not
// confirm.
func TestKafkaAdminWithAPausedBroker(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: []string{"--metadata-propagation-timeout", "500ms", "--broker-session-timeout", "60s"}})
	var cluster clusterView
	httpGetJSON(t, c.Node(1).URL+"/v1/cluster", &cluster)
	leader := c.Node(int(cluster.LeaderID))
	pausedID := int(cluster.LeaderID)%3 + 1
	paused := c.Node(pausedID)
	adm, _, ctx := adminClient(t, leader.KafkaAddr)
	paused.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { paused.Signal(syscall.SIGCONT) })
	r, err := adm.CreateTopic(ctx, 1, 1, nil, "while-paused")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create with broker %d paused: %v", pausedID, err)
	}
	servertest.WaitFor(t, 30*time.Second, "the unconfirmed broker logged", func() bool {
		return strings.Contains(leader.Logs(), "not confirmed by every alive broker")
	})
}

// The librdkafka symptom of the same window (issue 18): a producer started
// right after CreatePartitions 3->4 returned asked a broker that had not
// applied it yet, partitioned over 3 partitions and left the new one
// empty (without the wait, 9 rounds of 12 on the 2-core VM; a producer that
// learns 4 partitions from one broker and 3 from another leaves the new
// partition's records queued with no error). kcat (librdkafka) is seeded
// with every node; its default partitioner spreads these keys over all
// four partitions once it knows them.
func TestKafkaKcatSeesGrownTopic(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		servertest.MissingTool(t, "kcat not installed")
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	adm, _, ctx := adminClient(t, c.Node(1).KafkaAddr)
	var brokers []string
	for _, n := range c.Nodes {
		brokers = append(brokers, n.KafkaAddr)
	}
	var in strings.Builder
	for i := range 400 {
		fmt.Fprintf(&in, "key-%d:v%d\n", i, i)
	}
	for round := range 5 {
		topic := fmt.Sprintf("grown-%d", round)
		mustCreateKafkaTopic(t, adm, ctx, topic, 3, 3, nil)
		if rs, err := adm.CreatePartitions(ctx, 1, topic); err != nil || rs[topic].Err != nil {
			t.Fatalf("grow %s: %v %+v", topic, err, rs)
		}
		kcat(t, strings.NewReader(in.String()), "-b", strings.Join(brokers, ","), "-P", "-t", topic, "-K:",
			"-X", "message.timeout.ms=30000")
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var per []int64
		total := int64(0)
		for p := range int32(4) {
			o, _ := ends.Lookup(topic, p)
			per = append(per, o.Offset)
			total += o.Offset
		}
		if total != 400 || per[3] == 0 {
			t.Fatalf("round %d: kcat wrote %v per partition (of 400), none to the partition just added", round, per)
		}
	}
}

// Issue 18: once ElectLeaders (Kafka) or POST .../elect-leaders (HTTP, the
// CLI's path) returns, every alive broker's Metadata names the elected
// leaders. Each round rotates every partition's replica order (a
// reassignment within the same set: the leader stays, the preferred
// replica changes), then asks for the preferred leaders, alternating Kafka
// and HTTP and the node asked, and reads Metadata from every node at once.
func TestElectLeadersVisibleOnEveryBroker(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: append(slices.Clone(fastSessions), "--leader-rebalance-interval", "0")})
	const topic, parts = "elected", 6
	adm, _, ctx := adminClient(t, c.Node(1).KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, topic, parts, 3, nil)
	var ps []partitionView
	servertest.WaitFor(t, 30*time.Second, "every replica in sync", func() bool {
		var ok bool
		ps, ok = describe(c.Node(1), topic)
		if !ok || len(ps) != parts {
			return false
		}
		for _, p := range ps {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	var seeds []*kgo.Broker
	for _, n := range c.Nodes {
		seeds = append(seeds, rawClient(t, n.KafkaAddr).SeedBrokers()[0])
	}
	replicas := make([][]int32, parts)
	for i, p := range ps {
		replicas[i] = p.Replicas
	}
	for round := range 6 {
		asked := c.Node(round%3 + 1)
		var req kadm.AlterPartitionAssignmentsReq
		for i := range replicas {
			r := replicas[i]
			replicas[i] = []int32{r[1], r[2], r[0]}
			req.Assign(topic, int32(i), replicas[i])
		}
		if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
			t.Fatalf("round %d: reorder replicas: %v %v", round, err, res.Error())
		}
		how := "Kafka ElectLeaders"
		if round%2 == 0 {
			a, _, actx := adminClient(t, asked.KafkaAddr)
			set := kadm.TopicsSet{topic: {}}
			for i := range int32(parts) {
				set.Add(topic, i)
			}
			res, err := a.ElectLeaders(actx, kadm.ElectPreferredReplica, set)
			if err != nil {
				t.Fatalf("round %d: elect: %v", round, err)
			}
			for p, r := range res[topic] {
				if r.Err != nil {
					t.Fatalf("round %d: elect %s-%d: %v", round, topic, p, r.Err)
				}
			}
		} else {
			how = "HTTP elect-leaders"
			newAPIClient(t, asked).json("POST", "/v1/topics/"+topic+"/elect-leaders", nil, 200, nil)
		}
		for n, seed := range seeds {
			mreq := kmsg.NewPtrMetadataRequest()
			mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
			resp, err := seed.RetriableRequest(ctx, mreq)
			if err != nil {
				t.Fatalf("metadata from node %d: %v", n+1, err)
			}
			for _, p := range resp.(*kmsg.MetadataResponse).Topics[0].Partitions {
				if want := replicas[p.Partition][0]; p.Leader != want {
					t.Fatalf("round %d, right after %s on node %d: node %d names %d as leader of %s-%d, elected %d",
						round, how, round%3+1, n+1, p.Leader, topic, p.Partition, want)
				}
			}
		}
	}
}
