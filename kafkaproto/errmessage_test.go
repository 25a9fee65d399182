package kafkaproto

import (
	"errors"
	"fmt"
	"testing"
)

// Error messages sent to Kafka clients name no internal Go package.
func TestErrMessageNamesNoPackage(t *testing.T) {
	err := fmt.Errorf("create topic orders: %w", errors.New("raftfsm: topic already exists: orders"))
	if got := *errMessage(err); got != "create topic orders: topic already exists: orders" {
		t.Fatalf("errMessage = %q", got)
	}
}
