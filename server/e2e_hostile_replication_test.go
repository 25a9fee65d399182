package server_test

// Hostile-input tests of replication and producer state (issue 12, items 2,
// 8 and 9), against real runnel processes: a client pretending to be a
// follower, a connection flood on the client port, and a producer using
// another producer's id.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// rawKafka sends req on conn (a fresh or reused connection) and decodes the
// answer into resp. It uses no client library logic, so a test can send
// what a real client never would.
func rawKafka(t *testing.T, conn net.Conn, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	if err := rawKafkaErr(conn, req, resp); err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

func rawKafkaErr(conn net.Conn, req kmsg.Request, resp kmsg.Response) error {
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	defer conn.SetDeadline(time.Time{})
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile-test"))
	if _, err := conn.Write(f.AppendRequest(nil, req, 7)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return err
	}
	body = body[4:] // correlation id
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		body = body[1:] // no header tags
	}
	return resp.ReadFrom(body)
}

// replicatedPair starts one controller and two brokers and creates topic
// with RF=2 and min.insync.replicas=2; it returns the partition's leader
// and follower once both are in sync.
func replicatedPair(t *testing.T, topic string, args ...string) (c *servertest.Cluster, leader, follower *servertest.Node, followerID int32) {
	t.Helper()
	c = servertest.StartCluster(t, servertest.ClusterOptions{Controllers: 1, Brokers: 2, Args: args})
	n := c.Node(2)
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Post(n.URL+"/v1/topics", "application/json", bytes.NewReader([]byte(
		fmt.Sprintf(`{"name":%q,"partitions":1,"replication_factor":2,"configs":{"min.insync.replicas":"2"}}`, topic))))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create %s: %v %v", topic, err, resp)
	}
	resp.Body.Close()
	var p partitionView
	servertest.WaitFor(t, 30*time.Second, "both replicas in sync", func() bool {
		ps, ok := describe(n, topic)
		if ok && len(ps) == 1 && len(ps[0].ISR) == 2 && ps[0].Leader > 0 {
			p = ps[0]
			return true
		}
		return false
	})
	leader = c.Node(int(p.Leader))
	for _, r := range p.Replicas {
		if r != p.Leader {
			followerID = r
		}
	}
	return c, leader, c.Node(int(followerID)), followerID
}

// spoofedFetch is a Fetch claiming to come from follower id, saying its log
// reaches far beyond the leader's.
func spoofedFetch(topic string, id int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = id
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<40, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPartitionCode(t *testing.T, resp *kmsg.FetchResponse) int16 {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer: %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// A client on the public Kafka port that claims to be the follower must not
// make the leader count it in sync: with the real follower paused, an
// acks=all write must not be acknowledged (issue 12, item 2).
func TestHostileSpoofedReplicaFetch(t *testing.T) {
	const topic = "spoof"
	_, leader, follower, followerID := replicatedPair(t, topic)
	if _, ok := produceOne(leader, topic, "before", 15*time.Second); !ok {
		t.Fatal("acks=all produce with both replicas up failed")
	}

	follower.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { follower.Signal(syscall.SIGCONT) })

	conn, err := net.Dial("tcp", leader.KafkaAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp := kmsg.NewPtrFetchResponse()
	rawKafka(t, conn, spoofedFetch(topic, followerID), resp)
	if code := fetchPartitionCode(t, resp); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("replica fetch on the client port: error %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	if off, ok := produceOne(leader, topic, "must-not-be-acked", 3*time.Second); ok {
		t.Fatalf("acks=all write acknowledged at offset %d while the only follower is paused", off)
	}

	// The real follower, once resumed, catches up and writes are
	// acknowledged again.
	follower.Signal(syscall.SIGCONT)
	servertest.WaitFor(t, 60*time.Second, "acks=all writes acknowledged again", func() bool {
		_, ok := produceOne(leader, topic, "after", 5*time.Second)
		return ok
	})
}

// peerKafka opens an inter-broker Kafka connection on node n's raft port
// claiming to be node id, as a follower's fetcher does.
func peerKafka(t *testing.T, n *servertest.Node, id int32) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", n.RaftAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hello := []byte{'K', 1}
	hello = binary.BigEndian.AppendUint32(hello, uint32(id))
	if _, err := conn.Write(hello); err != nil {
		t.Fatal(err)
	}
	return conn
}

// On the inter-broker door a replica fetch is accepted only from the
// broker it names, and only for a replica of the partition.
func TestHostilePeerFetchIdentity(t *testing.T) {
	const topic = "peerid"
	c, leader, _, followerID := replicatedPair(t, topic)
	var outsider int32 = 1 // the controller: no replica of the partition
	_ = c

	// Claims to be the controller in the hello, fetches as the follower.
	resp := kmsg.NewPtrFetchResponse()
	rawKafka(t, peerKafka(t, leader, outsider), spoofedFetch(topic, followerID), resp)
	if code := fetchPartitionCode(t, resp); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("replica id differing from the peer's: error %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	// Names itself consistently, but is no replica of the partition.
	resp = kmsg.NewPtrFetchResponse()
	rawKafka(t, peerKafka(t, leader, outsider), spoofedFetch(topic, outsider), resp)
	if code := fetchPartitionCode(t, resp); !slices.Contains([]int16{kerr.NotLeaderForPartition.Code, kerr.UnknownLeaderEpoch.Code}, code) {
		t.Errorf("replica fetch from a non-replica: error %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
	// The real follower, beyond the leader's log end, is out of range and
	// does not move the high watermark.
	resp = kmsg.NewPtrFetchResponse()
	rawKafka(t, peerKafka(t, leader, followerID), spoofedFetch(topic, followerID), resp)
	if code := fetchPartitionCode(t, resp); code != kerr.OffsetOutOfRange.Code {
		t.Errorf("replica fetch past the log end: error %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(code))
	}
}

// connFlood keeps n connections open to addr from the loopback addresses
// 127.0.0.2..: a connection the server closes is dialled again after
// pace, until stop is called. It reports how many are open.
type connFlood struct {
	open atomic.Int64
	done chan struct{}
	wg   sync.WaitGroup
}

func startConnFlood(t *testing.T, addr string, n, sources int, pace time.Duration) *connFlood {
	t.Helper()
	f := &connFlood{done: make(chan struct{})}
	for i := range n {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
			for {
				if c, err := d.Dial("tcp", addr); err == nil {
					f.open.Add(1)
					stop := context.AfterFunc(ctxDone(f.done), func() { c.Close() })
					io.Copy(io.Discard, c) // until the server (or stop) closes it
					stop()
					c.Close()
					f.open.Add(-1)
				}
				select {
				case <-f.done:
					return
				case <-time.After(pace):
				}
			}
		}()
	}
	t.Cleanup(f.stop)
	return f
}

func (f *connFlood) stop() {
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.wg.Wait()
}

// ctxDone is a context cancelled when done closes.
func ctxDone(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	return ctx
}

// Clients holding every slot of the Kafka client port do not keep a
// restarted follower from replicating: it rejoins the ISR and acks=all
// writes are acknowledged again; the refused connections cost a few log
// lines, not one per attempt (issue 12, item 8).
func TestHostileConnectionFloodKeepsReplication(t *testing.T) {
	const topic = "flood"
	_, leader, follower, followerID := replicatedPair(t, topic, "--replica-lag-time-max", "3s")

	// 1,020 connections from three addresses: more than the 1,000 the
	// client port takes, fewer than its per-address cap from each.
	flood := startConnFlood(t, leader.KafkaAddr, 1020, 3, 100*time.Millisecond)
	servertest.WaitFor(t, 60*time.Second, "the client port full", func() bool { return flood.open.Load() >= 995 })

	follower.Stop()
	servertest.WaitFor(t, 60*time.Second, "the stopped follower out of the ISR", func() bool {
		ps, ok := describe(leader, topic)
		return ok && len(ps) == 1 && !slices.Contains(ps[0].ISR, followerID)
	})
	follower.Start()
	servertest.WaitFor(t, 90*time.Second, "the restarted follower back in the ISR", func() bool {
		ps, ok := describe(leader, topic)
		return ok && len(ps) == 1 && slices.Contains(ps[0].ISR, followerID)
	})
	if _, ok := produceOne(leader, topic, "after-flood", 15*time.Second); !ok {
		t.Fatal("acks=all write not acknowledged with the follower back in sync")
	}
	flood.stop()
	logs := leader.Logs()
	if n := strings.Count(logs, "connection limit"); n > 30 {
		t.Errorf("%d log lines about the connection limit; want them rate-limited", n)
	}
	t.Logf("leader log: %d bytes, %d WARN lines", len(logs), strings.Count(logs, "level=WARN"))
	if n := strings.Count(logs, "level=WARN"); n > 100 {
		t.Errorf("%d WARN lines on the leader during the flood; want repetitive lines rate-limited", n)
	}
}

// valueBatch is an idempotent producer's batch of one record holding value.
func valueBatch(pid int64, epoch int16, seq int32, value string) []byte {
	now := time.Now().UnixMilli()
	r := kmsg.NewRecord()
	r.Value = []byte(value)
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	b := kmsg.NewRecordBatch()
	b.Magic, b.NumRecords = 2, 1
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, seq
	b.Records = r.AppendTo(nil)
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func initProducerID(t *testing.T, c net.Conn, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.ProducerID, req.ProducerEpoch = 4, pid, epoch
	resp := rawRoundTrip(t, c, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// A producer using another producer's id cannot have its record stand for
// the other's: the victim's next batch is never acknowledged at an offset
// holding a record it did not write. Ids the controller never allocated
// are refused, and InitProducerId hands out fresh ids rather than bumping
// someone else's epoch (issue 12, item 9).
func TestHostileProducerIDHijack(t *testing.T) {
	n := kafkaNode(t)
	httpCreateTopic(t, n, "hijack", 1)
	victim, attacker := rawDial(t, n.KafkaAddr), rawDial(t, n.KafkaAddr)
	ip := initProducerID(t, victim, -1, -1)
	pid, epoch := ip.ProducerID, ip.ProducerEpoch

	if r := rawProduce(t, victim, "hijack", valueBatch(pid, epoch, 0, "victim-0")); r.ErrorCode != 0 {
		t.Fatalf("victim seq 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The attacker writes the victim's next sequence first. Nothing on the
	// wire tells the two apart, so this write itself is taken.
	rawProduce(t, attacker, "hijack", valueBatch(pid, epoch, 1, "attacker-1"))

	r := rawProduce(t, victim, "hijack", valueBatch(pid, epoch, 1, "victim-1"))
	if r.ErrorCode == 0 {
		if got := readAll(t, n, "hijack")[r.BaseOffset]; got != "victim-1" {
			t.Fatalf("victim's seq 1 acknowledged at offset %d, which holds %q", r.BaseOffset, got)
		}
	} else if r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("victim's seq 1 after a hijacked one: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(r.ErrorCode))
	}

	// A producer id the controller never handed out.
	if r := rawProduce(t, attacker, "hijack", valueBatch(pid+1<<40, 0, 0, "forged")); r.ErrorCode != kerr.UnknownProducerID.Code {
		t.Errorf("unallocated producer id: %v, want UNKNOWN_PRODUCER_ID", kerr.ErrorForCode(r.ErrorCode))
	}

	// InitProducerId naming the victim's id and epoch does not fence the
	// victim by bumping its epoch: a non-transactional producer gets a new
	// id, as Kafka's transaction coordinator answers it.
	if got := initProducerID(t, attacker, pid, epoch); got.ProducerID == pid {
		t.Errorf("InitProducerId(%d, %d) bumped the victim's epoch to %d", pid, epoch, got.ProducerEpoch)
	}
}

// An idempotent producer idle for --producer-id-expiration is forgotten:
// its sequence is no longer enforced (issue 12, item 9).
func TestHostileProducerStateExpires(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--producer-id-expiration", "1s"}})
	httpCreateTopic(t, n, "expire", 1)
	c := rawDial(t, n.KafkaAddr)
	ip := initProducerID(t, c, -1, -1)
	if r := rawProduce(t, c, "expire", valueBatch(ip.ProducerID, 0, 0, "first")); r.ErrorCode != 0 {
		t.Fatalf("seq 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rawProduce(t, c, "expire", valueBatch(ip.ProducerID, 0, 40, "gap")); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap while the producer is known: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(r.ErrorCode))
	}
	servertest.WaitFor(t, 30*time.Second, "the idle producer forgotten", func() bool {
		return rawProduce(t, c, "expire", valueBatch(ip.ProducerID, 0, 40, "gap")).ErrorCode == 0
	})
}
