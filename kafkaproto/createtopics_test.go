package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// meetingBroker's CreateTopic goes on only once want calls are in it at
// the same time; a call that waits longer than a bound fails instead.
type meetingBroker struct {
	*memBroker
	want int
	mu   sync.Mutex
	in   int
	met  chan struct{} // closed once want calls arrived
}

var errNeverMet = errors.New("the other creations of the request never came")

func (b *meetingBroker) CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool) error {
	b.mu.Lock()
	if b.in++; b.in == b.want {
		close(b.met)
	}
	b.mu.Unlock()
	select {
	case <-b.met:
		return b.memBroker.CreateTopic(ctx, spec, validateOnly)
	case <-time.After(10 * time.Second):
		return errNeverMet
	}
}

// TestCreateTopicsConcurrently: the topics of one CreateTopics request are
// created at the same time, so their metadata proposals share the
// controller's log appends (issue 19); each still gets its own answer, in
// the request's order.
func TestCreateTopicsConcurrently(t *testing.T) {
	const n = 8
	b := &meetingBroker{memBroker: newMemBroker(), want: n, met: make(chan struct{})}
	s := NewServer(b, Options{})
	t.Cleanup(func() { s.Close() })
	var topics []kmsg.CreateTopicsRequestTopic
	for i := range n {
		topics = append(topics, newTopic(fmt.Sprintf("c%d", i), 1, 1))
	}
	topics = append(topics, newTopic("twice", 1, 1), newTopic("bad name", 1, 1), newTopic("twice", 1, 1))
	resp := serve[*kmsg.CreateTopicsResponse](s, context.Background(), createReq(false, topics...))
	if len(resp.Topics) != len(topics) {
		t.Fatalf("%d answers for %d topics", len(resp.Topics), len(topics))
	}
	for i, got := range resp.Topics {
		want := int16(0)
		switch {
		case i == n || i == n+2:
			want = kerr.InvalidRequest.Code
		case i == n+1:
			want = kerr.InvalidTopicException.Code
		}
		if got.Topic != topics[i].Topic || got.ErrorCode != want {
			t.Errorf("answer %d: topic %s code %d (%v), want %s code %d", i, got.Topic, got.ErrorCode, got.ErrorMessage, topics[i].Topic, want)
		}
	}
}

// lookupBroker counts the Clusters asked of it and looks single topics up
// (the optional TopicLookup).
type lookupBroker struct {
	*memBroker
	mu       sync.Mutex
	clusters int
}

func (b *lookupBroker) Cluster() (*Cluster, <-chan struct{}) {
	b.mu.Lock()
	b.clusters++
	b.mu.Unlock()
	return b.memBroker.Cluster()
}

func (b *lookupBroker) LookupTopic(name string) (TopicInfo, bool) {
	cl, _ := b.memBroker.Cluster()
	ti, ok := cl.Topic(name)
	if !ok {
		return TopicInfo{}, false
	}
	return *ti, true
}

// TestCreateTopicsDescribesOnlyTheirTopics: CreateTopics v5+ describes each
// topic it created. A Cluster holds every topic and a node rebuilds it
// after each metadata change, so asking for one per created topic cost work
// in the number of topics for every creation (75% of a node's CPU in a
// Kafka creation of 5,000 topics; issue 19): with a Broker that looks
// single topics up, none is asked for.
func TestCreateTopicsDescribesOnlyTheirTopics(t *testing.T) {
	b := &lookupBroker{memBroker: newMemBroker()}
	s := NewServer(b, Options{})
	t.Cleanup(func() { s.Close() })
	resp := serve[*kmsg.CreateTopicsResponse](s, context.Background(), createReq(false, newTopic("a", 3, 1), newTopic("b", 1, 1)))
	for _, got := range resp.Topics {
		if got.ErrorCode != 0 || got.TopicID != b.topics[got.Topic].id || got.NumPartitions != int32(len(b.topics[got.Topic].parts)) {
			t.Errorf("%s: code %d id %x partitions %d", got.Topic, got.ErrorCode, got.TopicID, got.NumPartitions)
		}
	}
	if b.clusters != 0 {
		t.Fatalf("CreateTopics of 2 topics asked for the whole cluster %d times", b.clusters)
	}
}
