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
