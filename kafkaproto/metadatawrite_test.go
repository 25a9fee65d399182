package kafkaproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataReplyMatchesKmsg: the streamed answer for every topic is,
// byte for byte, the frame kmsg encodes from metadata's structs, at every
// version, for topics of every shape (names of 1 and 300 bytes, 0 to 5,000
// partitions, so array lengths of one and two varint bytes and a response
// written in several chunks; several replicas, offline ones, leaders
// unknown, fenced or without this listener; internal topics; none at all).
func TestMetadataReplyMatchesKmsg(t *testing.T) {
	mb := newMemBroker()
	base := *mb.cluster
	base.Brokers = append(base.Brokers, BrokerInfo{ID: 2, Host: "h2", Port: 9, Rack: "r2"}, BrokerInfo{ID: 3, SSLHost: "h3", SSLPort: 10})
	shapes := []TopicInfo{
		{Name: "a", ID: [16]byte{1}},
		{Name: strings.Repeat("n", 300), ID: [16]byte{2}, Internal: true, Partitions: []PartitionInfo{
			{Partition: 0, Leader: 1, LeaderEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Offline: []int32{3}},
			{Partition: 1, Leader: -1, Replicas: []int32{4}},
			{Partition: 2, Leader: 3, Replicas: []int32{3}, ISR: []int32{3}},
			{Partition: 3, Leader: 9, Replicas: []int32{9}, ISR: []int32{9}},
		}},
		{Name: "big", ID: [16]byte{3}},
	}
	for p := range 5000 {
		shapes[2].Partitions = append(shapes[2].Partitions, PartitionInfo{Partition: int32(p), Leader: int32(p%2 + 1), LeaderEpoch: int32(p), Replicas: []int32{1, 2}, ISR: []int32{int32(p%2 + 1)}})
	}
	s := NewServer(mb, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	for _, topics := range [][]TopicInfo{nil, shapes[:1], shapes} {
		cl := base
		cl.Topics = topics
		mb.mu.Lock()
		mb.cluster = &cl
		mb.mu.Unlock()
		for v := int16(metadataMin); v <= metadataMax; v++ {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			streamedMatchesKmsg(t, s, req, fmt.Sprintf("v%d, %d topics", v, len(topics)))
		}
	}
}

// TestMetadataReplyNamedMatchesKmsg: an answer for named topics is
// streamed too, and is byte for byte what kmsg encodes from metadata's
// structs, at every version: topics named by name and by id, twice (answered
// once), unknown, invalid, in the order first named.
func TestMetadataReplyNamedMatchesKmsg(t *testing.T) {
	mb := newMemBroker()
	cl := *mb.cluster
	cl.Brokers = append(cl.Brokers, BrokerInfo{ID: 2, Host: "h2", Port: 9})
	cl.Topics = []TopicInfo{
		{Name: "a", ID: [16]byte{1}, Partitions: []PartitionInfo{{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Offline: []int32{2}}}},
		{Name: "b", ID: [16]byte{2}},
		{Name: "c", ID: [16]byte{3}},
	}
	for p := range 3000 {
		cl.Topics[1].Partitions = append(cl.Topics[1].Partitions, PartitionInfo{Partition: int32(p), Leader: int32(p%3 + 1), LeaderEpoch: int32(p), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	}
	s := serveCluster(t, mb, cl)
	for v := int16(metadataMin); v <= metadataMax; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		for _, name := range []string{"b", "missing", "a", "not a valid name!", "b"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		if v >= 10 { // by id: a known one and an unknown one
			for _, id := range [][16]byte{{3}, {9}} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.TopicID = id
				req.Topics = append(req.Topics, rt)
			}
		}
		got := streamedMatchesKmsg(t, s, req, fmt.Sprintf("v%d", v))
		// And kmsg reads it back as the request asked.
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = v
		if err := resp.ReadFrom(got[8:]); err != nil {
			t.Fatalf("v%d: read back: %v", v, err)
		}
		if len(resp.Topics) != len(req.Topics)-1 || len(resp.Topics[0].Partitions) != 3000 || resp.Topics[1].ErrorCode == 0 || resp.Topics[3].ErrorCode == 0 {
			t.Fatalf("v%d: %d topics for %d named (b twice), %d partitions of b, codes %d/%d for the missing and the invalid", v, len(resp.Topics), len(req.Topics), len(resp.Topics[0].Partitions), resp.Topics[1].ErrorCode, resp.Topics[3].ErrorCode)
		}
	}
}

// streamedMatchesKmsg checks that s streams its answer to req
// (metadataReply) and that the frame it writes is, byte for byte, the one
// kmsg encodes from metadata's structs; it returns the frame (a 4-byte
// size and a 4-byte correlation id first).
func streamedMatchesKmsg(t *testing.T, s *Server, req *kmsg.MetadataRequest, name string) []byte {
	t.Helper()
	reply, ok := s.serveMetadata(context.Background(), req).(*metadataReply)
	if !ok {
		t.Fatalf("%s: not streamed", name)
	}
	prefix := []byte{0, 0, 0, 0, 0, 0, 0, 42}
	want := s.metadata(context.Background(), req).AppendTo(append([]byte(nil), prefix...))
	binary.BigEndian.PutUint32(want, uint32(len(want)-4))
	var got bytes.Buffer
	if _, err := reply.writeTo(&got, append([]byte(nil), prefix...)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("%s: streamed %d bytes, kmsg encodes %d, first difference at %d", name, got.Len(), len(want), firstDiff(got.Bytes(), want))
	}
	return got.Bytes()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMetadataNamedTopicsAnsweredOnce: a request naming a topic many times
// (by name, by id, or both) is answered with that topic once, as Kafka
// answers (it reads the names into a set). Answering every copy let one
// 1 MB request ask for gigabytes: here 20,000 copies of a 3,000-partition
// topic's name, each answered with ~80 KB.
func TestMetadataNamedTopicsAnsweredOnce(t *testing.T) {
	mb := newMemBroker()
	cl := *mb.cluster
	cl.Topics = []TopicInfo{{Name: "b", ID: [16]byte{2}}}
	for p := range 3000 {
		cl.Topics[0].Partitions = append(cl.Topics[0].Partitions, PartitionInfo{Partition: int32(p), Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
	}
	s := serveCluster(t, mb, cl)
	for _, v := range []int16{1, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic, rt.TopicID = name, id
			req.Topics = append(req.Topics, rt)
		}
		for range 20000 {
			add(kmsg.StringPtr("b"), [16]byte{})
		}
		add(kmsg.StringPtr("missing"), [16]byte{})
		add(kmsg.StringPtr("missing"), [16]byte{})
		if v >= 10 {
			add(nil, [16]byte{2}) // b again, by its id
			add(nil, [16]byte{9})
			add(nil, [16]byte{9})
		}
		got := streamedMatchesKmsg(t, s, req, fmt.Sprintf("v%d", v))
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = v
		if err := resp.ReadFrom(got[8:]); err != nil {
			t.Fatalf("v%d: read back: %v", v, err)
		}
		want := 2 // b and missing
		if v >= 10 {
			want = 3 // and the unknown id
		}
		if len(resp.Topics) != want || len(got) > 200_000 {
			t.Fatalf("v%d: %d topics answered (want %d), %d bytes", v, len(resp.Topics), want, len(got))
		}
		if resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "b" || len(resp.Topics[0].Partitions) != 3000 || resp.Topics[1].ErrorCode == 0 {
			t.Fatalf("v%d: answered %+v first, then code %d for the missing topic", v, resp.Topics[0].Topic, resp.Topics[1].ErrorCode)
		}
	}
}

// serveCluster is a server on mb whose cluster is cl (its topic ids
// indexed), closed when the test ends.
func serveCluster(t *testing.T, mb *memBroker, cl Cluster) *Server {
	t.Helper()
	cl.IndexTopicIDs()
	mb.mu.Lock()
	mb.cluster = &cl
	mb.mu.Unlock()
	s := NewServer(mb, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { s.Close() })
	return s
}
