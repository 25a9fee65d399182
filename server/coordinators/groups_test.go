package coordinators

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker"
)

// A commit whose offsets partition moved away answers NOT_COORDINATOR (the
// client finds the new coordinator), as Kafka does, not
// NOT_LEADER_FOR_PARTITION, which fails the commit in clients.
func TestCoordinatorAppendErrors(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{fmt.Errorf("produce: %w", broker.ErrNotLeader), kafkaproto.ErrNotCoordinator},
		{fmt.Errorf("append: %w", segments.ErrStorage), kafkaproto.ErrNotCoordinator},
		{fmt.Errorf("wait: %w", broker.ErrNotEnoughReplicas), kafkaproto.ErrCoordinatorNotAvailable},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), kafkaproto.ErrCoordinatorNotAvailable},
	}
	for _, c := range cases {
		got := coordinatorAppendError(c.err)
		if !errors.Is(got, c.want) {
			t.Errorf("%v -> %v, want %v", c.err, got, c.want)
		}
		if errors.Is(got, broker.ErrNotLeader) {
			t.Errorf("%v still reads as not-leader: %v", c.err, got)
		}
	}
	other := errors.New("something else")
	if got := coordinatorAppendError(other); got != other {
		t.Errorf("unrelated error changed: %v", got)
	}
}
