package kafkaproto

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaSpy records the replica ids the listener passes to the broker.
type replicaSpy struct {
	*memBroker
	replicaFetches atomic.Int32
	lastReplica    atomic.Int32
}

func (b *replicaSpy) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	if req.ReplicaID >= 0 {
		b.replicaFetches.Add(1)
		b.lastReplica.Store(req.ReplicaID)
	}
	return b.memBroker.Fetch(ctx, req)
}

// peerListener wraps accepted connections as peers that claimed id.
type peerListener struct {
	net.Listener
	id int32
}

type testPeerConn struct {
	net.Conn
	id int32
}

func (c testPeerConn) PeerNodeID() int32 { return c.id }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return testPeerConn{Conn: c, id: l.id}, nil
}

// startDoors serves b on a client listener and on a peer listener whose
// connections claim peerID.
func startDoors(t *testing.T, b Broker, opts Options, peerID int32) (client, peer string) {
	t.Helper()
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewServer(b, opts)
	done := make(chan error, 2)
	go func() { done <- s.Serve(context.Background(), cln) }()
	go func() { done <- s.ServePeers(context.Background(), peerListener{pln, peerID}) }()
	t.Cleanup(func() {
		s.Close()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	return cln.Addr().String(), pln.Addr().String()
}

func dialT(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func replicaFetch(topic string, replicaID int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = replicaID, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchCode(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	fr := resp.(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response with %d topics", len(fr.Topics))
	}
	return fr.Topics[0].Partitions[0].ErrorCode
}

// Replica requests are taken only on the peer door and only under the id
// the peer claimed; consumers are served on both doors.
func TestReplicaRequestsOnlyFromThatPeer(t *testing.T) {
	b := &replicaSpy{memBroker: newMemBroker()}
	mustCreate(t, b.memBroker, "t", 1)
	clientAddr, peerAddr := startDoors(t, b, Options{}, 2)
	client, peer := dialT(t, clientAddr), dialT(t, peerAddr)

	if code := fetchCode(t, roundTrip(t, client, replicaFetch("t", 2))); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("replica fetch on the client door: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := fetchCode(t, roundTrip(t, peer, replicaFetch("t", 3))); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("peer 2 fetching as 3: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if n := b.replicaFetches.Load(); n != 0 {
		t.Fatalf("%d refused replica fetches reached the broker", n)
	}
	ole := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ole.SetVersion(4)
	ole.ReplicaID = 2
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
	ole.Topics = append(ole.Topics, rt)
	oresp := roundTrip(t, client, ole).(*kmsg.OffsetForLeaderEpochResponse)
	if code := oresp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetForLeaderEpoch as a replica on the client door: %v", kerr.ErrorForCode(code))
	}

	if code := fetchCode(t, roundTrip(t, peer, replicaFetch("t", 2))); code != 0 {
		t.Errorf("peer 2 fetching as itself: %v", kerr.ErrorForCode(code))
	}
	if code := fetchCode(t, roundTrip(t, client, replicaFetch("t", -1))); code != 0 {
		t.Errorf("consumer fetch on the client door: %v", kerr.ErrorForCode(code))
	}
	if n, id := b.replicaFetches.Load(), b.lastReplica.Load(); n != 1 || id != 2 {
		t.Errorf("broker saw %d replica fetches (last %d), want 1 from 2", n, id)
	}
}

// served reports whether a connection to addr is answered (rather than
// closed by a connection limit).
func served(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c := dialT(t, addr)
	req := apiVersionsRequest(3)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(testFormatter.AppendRequest(nil, req, 1)); err != nil {
		return c, false
	}
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	if err != nil {
		return c, false
	}
	body := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
	_, err = io.ReadFull(c, body)
	return c, err == nil
}

// Clients holding every client slot, or every slot of their address, do
// not keep peers (or other addresses) out.
func TestConnectionBudgetsPerDoor(t *testing.T) {
	b := newMemBroker()
	clientAddr, peerAddr := startDoors(t, b, Options{MaxConnections: 3, MaxConnectionsPerIP: 2, MaxPeerConnections: 2}, 2)
	for i := range 2 {
		if _, ok := served(t, clientAddr); !ok {
			t.Fatalf("client connection %d refused", i)
		}
	}
	if _, ok := served(t, clientAddr); ok {
		t.Fatal("third connection from one address served past MaxConnectionsPerIP=2")
	}
	for i := range 2 {
		if _, ok := served(t, peerAddr); !ok {
			t.Fatalf("peer connection %d refused while clients hold their slots", i)
		}
	}
	if _, ok := served(t, peerAddr); ok {
		t.Fatal("peer connection served past MaxPeerConnections=2")
	}
}
