package kafkaproto

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkMetadataAllTopics: one Metadata request for every topic (v12,
// Topics nil) through the request path (decode, handler, encode) on an
// in-memory connection, against a cluster of 100 topics of 1,000 RF-1
// partitions: B/op is what the listener allocates to answer it, reported
// beside the response's bytes per partition. "streamed" is the listener's
// path (metadataReply); "named" the same path for a request naming every
// topic; "structs" the one it replaced, kmsg structs for every partition
// encoded into one buffer, measured in the same run.
func BenchmarkMetadataAllTopics(b *testing.B) {
	mb := newMemBroker()
	cl := *mb.cluster
	cl.Topics = nil
	const topics, parts = 100, 1000
	for i := range topics {
		t := TopicInfo{Name: fmt.Sprintf("md-%05d", i), ID: [16]byte{byte(i), byte(i >> 8), 1}}
		for p := range parts {
			t.Partitions = append(t.Partitions, PartitionInfo{Partition: int32(p), Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
		}
		cl.Topics = append(cl.Topics, t)
	}
	mb.mu.Lock()
	mb.cluster = &cl
	mb.mu.Unlock()
	s := NewServer(mb, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	frame := testFormatter.AppendRequest(nil, req, 1)[4:]
	b.Run("streamed", func(b *testing.B) {
		n := handleEach(b, s, frame)
		b.ReportMetric(float64(n)/(topics*parts), "response-B/partition")
		b.ReportMetric(float64(n)/(1<<20), "response-MiB")
	})
	// The same topics named in the request, as franz-go and the Java
	// client ask (streamed since issue 19; "structs" before).
	named := kmsg.NewPtrMetadataRequest()
	named.Version = 12
	for _, t := range cl.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t.Name)
		named.Topics = append(named.Topics, rt)
	}
	namedFrame := testFormatter.AppendRequest(nil, named, 1)[4:]
	b.Run("named", func(b *testing.B) {
		b.ReportMetric(float64(handleEach(b, s, namedFrame))/(1<<20), "response-MiB")
	})
	b.Run("structs", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for range b.N {
			out := s.metadata(context.Background(), req).AppendTo(make([]byte, 8))
			n = len(out)
		}
		b.ReportMetric(float64(n)/(1<<20), "response-MiB")
	})
}

// handleEach serves the request frame b.N times on an in-memory
// connection, with allocations reported, and returns the response's size.
func handleEach(b *testing.B, s *Server, frame []byte) int {
	nc := &captureConn{}
	c := &conn{s: s, nc: nc}
	b.ReportAllocs()
	for range b.N {
		nc.out.Reset()
		if err := c.handle(frame); err != nil {
			b.Fatal(err)
		}
		c.out = nil // a connection keeps no buffer this large (pipeline.go)
	}
	return nc.out.Len()
}
