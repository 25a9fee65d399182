package kapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error messages sent to Kafka clients name no internal Go package.
func TestErrMessageNamesNoPackage(t *testing.T) {
	err := fmt.Errorf("create topic orders: %w", errors.New("raftfsm: topic already exists: orders"))
	if got := *ErrMessage(err); got != "create topic orders: topic already exists: orders" {
		t.Fatalf("ErrMessage = %q", got)
	}
}

func TestErrorTable(t *testing.T) {
	for _, e := range errorTable {
		wrapped := fmt.Errorf("server: partition 3: %w", e.err)
		if got := KafkaErr(wrapped); got != e.code.Code {
			t.Errorf("%v: code %d, want %d", e.err, got, e.code.Code)
		}
	}
	if got := KafkaErr(errors.New("disk on fire")); got != kerr.UnknownServerError.Code {
		t.Errorf("unmatched error: code %d", got)
	}
	if KafkaErr(nil) != 0 {
		t.Error("nil error has a code")
	}
}

func TestGroupErrCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("x: %w", ErrRebalanceInProgress), kerr.RebalanceInProgress},
		{ErrNotCoordinator, kerr.NotCoordinator},
		{ErrMemberIDRequired, kerr.MemberIDRequired},
		{fmt.Errorf("wrapped: %w", ErrUnknownTopicOrPartition), kerr.UnknownTopicOrPartition},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
	} {
		if got := GroupErr(tc.err); got != tc.want.Code {
			t.Errorf("GroupErr(%v) = %d, want %d", tc.err, got, tc.want.Code)
		}
	}
}
