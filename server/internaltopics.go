package server

import (
	"errors"
	"fmt"
)

// transactionStateTopic is reserved for the transaction coordinator.
const transactionStateTopic = "__transaction_state"

// errInternalTopic: a client asked to write, delete, create or reconfigure
// an internal topic. Only its coordinator appends to it (through the
// partition, never through a front door), so a forged commit, a deleted
// topic or a retention of one second cannot lose every group's offsets.
var errInternalTopic = errors.New("internal topic")

// isInternal is THE list of internal topics: written only by their
// coordinators, readable by clients.
func isInternal(name string) bool {
	switch name {
	case offsetsTopic, transactionStateTopic:
		return true
	}
	return false
}

// refuseInternal is the front doors' check before a client's write, delete,
// create or config change of topic.
func refuseInternal(topic, what string) error {
	if isInternal(topic) {
		return fmt.Errorf("%w: %s is written only by its coordinator; clients cannot %s it", errInternalTopic, topic, what)
	}
	return nil
}
