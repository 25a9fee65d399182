package admin

import (
	"errors"
	"fmt"

	"github.com/runnel/runnel/server/groups"
)

// TransactionStateTopic is reserved for the transaction coordinator.
const TransactionStateTopic = "__transaction_state"

// ErrInternalTopic: a client asked to write, delete, create or reconfigure
// an internal topic. Only its coordinator appends to it (through the
// partition, never through a front door), so a forged commit, a deleted
// topic or a retention of one second cannot lose every group's offsets.
var ErrInternalTopic = errors.New("internal topic")

// IsInternal is THE list of internal topics: written only by their
// coordinators, readable by clients.
func IsInternal(name string) bool {
	switch name {
	case groups.OffsetsTopic, TransactionStateTopic:
		return true
	}
	return false
}

// RefuseInternal is the front doors' check before a client's write, delete,
// create or config change of topic.
func RefuseInternal(topic, what string) error {
	if IsInternal(topic) {
		return fmt.Errorf("%w: %s is written only by its coordinator; clients cannot %s it", ErrInternalTopic, topic, what)
	}
	return nil
}
