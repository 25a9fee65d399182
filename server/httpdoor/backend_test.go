package httpdoor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/broker"
)

// Every row of the door's one error table gives the api's sentinel (its
// status and problem type) and keeps the node's message as the detail;
// a stored corrupt batch names its position; other errors pass through.
func TestHTTPErrorTable(t *testing.T) {
	for _, e := range httpErrors {
		err := fmt.Errorf("topic x: %w", e.from)
		got := HTTPError(err)
		if !errors.Is(got, e.to) || got.Error() != err.Error() {
			t.Errorf("%v -> %v (%v), want %v with the same message", e.from, got, api.KindOf(got).Type, e.to)
		}
	}
	cb := HTTPError(&broker.CorruptBatchError{Topic: "t", Partition: 1, Offset: 5, Next: 9})
	var acb *api.CorruptBatchError
	if !errors.As(cb, &acb) || acb.Offset != 5 || acb.NextOffset != 9 || api.KindOf(cb).Err != api.ErrCorruptBatch {
		t.Errorf("corrupt batch: %v", cb)
	}
	if HTTPError(nil) != nil {
		t.Error("nil is not nil")
	}
	other := errors.New("something else")
	if HTTPError(other) != other {
		t.Error("an error outside the table changed")
	}
}
