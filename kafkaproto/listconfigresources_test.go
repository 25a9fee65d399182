package kafkaproto

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListConfigResources lists topics and brokers (v1, all types or the ones
// asked), nothing for client metrics (v0) or groups, and refuses an unknown
// type.
func TestListConfigResources(t *testing.T) {
	// Kafka's config resource types.
	const (
		configResourceTopic         int8 = 2
		configResourceBroker        int8 = 4
		configResourceClientMetrics int8 = 16
		configResourceGroup         int8 = 32
	)
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	mustCreate(t, b, "cfg-a", 1)
	mustCreate(t, b, "cfg-b", 2)
	c := dial(t, addr)
	list := func(v int16, types ...int8) *kmsg.ListConfigResourcesResponse {
		r := kmsg.NewPtrListConfigResourcesRequest()
		r.Version, r.ResourceTypes = v, types
		return roundTrip(t, c, r).(*kmsg.ListConfigResourcesResponse)
	}
	names := func(r *kmsg.ListConfigResourcesResponse) (out []string) {
		for _, cr := range r.ConfigResources {
			out = append(out, string(rune('0'+cr.Type))+":"+cr.Name)
		}
		slices.Sort(out)
		return out
	}
	topic, broker := string(rune('0'+configResourceTopic)), string(rune('0'+configResourceBroker))
	if got, want := names(list(1)), []string{topic + ":cfg-a", topic + ":cfg-b", broker + ":1"}; !slices.Equal(got, want) {
		t.Fatalf("v1, every type: %v, want %v", got, want)
	}
	if got, want := names(list(1, configResourceTopic)), []string{topic + ":cfg-a", topic + ":cfg-b"}; !slices.Equal(got, want) {
		t.Fatalf("v1, topics: %v, want %v", got, want)
	}
	if r := list(1, configResourceGroup, configResourceClientMetrics); r.ErrorCode != 0 || len(r.ConfigResources) != 0 {
		t.Fatalf("v1, groups and client metrics: %+v", r)
	}
	if r := list(0); r.ErrorCode != 0 || len(r.ConfigResources) != 0 {
		t.Fatalf("v0 (client metrics): %+v", r)
	}
	if r := list(1, 99); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown type: error %d, want INVALID_REQUEST", r.ErrorCode)
	}
}
