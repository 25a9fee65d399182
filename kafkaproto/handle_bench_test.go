package kafkaproto

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHandle measures one request through the request path alone
// (header, decode, table lookup, handler, encode) on an in-memory
// connection: the cost the handler table adds per request shows here as
// ns/op and allocs/op, without the network and the client that dominate
// BenchmarkListener.
func BenchmarkHandle(b *testing.B) {
	mb := newMemBroker()
	mustCreate(b, mb, "bench", 1)
	s := NewServer(mb, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	describe := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "bench"
	describe.Resources = append(describe.Resources, r)
	groups := kmsg.NewPtrDescribeGroupsRequest()
	groups.Groups = []string{"g"}
	for _, bc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"produce", produceReq("bench", 0, 1, testBatch(2, -1, -1))},
		{"metadata", metadataReq(12, "bench")},
		{"describeconfigs", describe},
		{"describegroups", groups},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := testFormatter.AppendRequest(nil, bc.req, 1)[4:]
			nc := &captureConn{}
			c := &conn{s: s, nc: nc}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				nc.out.Reset()
				if err := c.handle(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
