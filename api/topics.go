package api

import (
	"fmt"
)

// ValidTopicName reports whether name is a legal topic name (Kafka's rules).
func ValidTopicName(name string) error {
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopicName, name)
	}
	if !legalTopicName(name) {
		return fmt.Errorf("%w: %q: 1 to 249 characters of [a-zA-Z0-9._-]", ErrInvalidTopicName, name)
	}
	return nil
}

// TopicList is GET /v1/topics: one page of topics, and the cursor of the
// next page when there is one.
type TopicList struct {
	Topics     []TopicSummary `json:"topics"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// Topic list pages: the default and largest page sizes. A cluster with up to
// DefaultTopicPage topics is listed in one page, as before pages existed.
const (
	DefaultTopicPage = 1000
	MaxTopicPage     = 10000
)

// AlterConfigsRequest is the body of PATCH /v1/topics/{topic}/configs.
type AlterConfigsRequest struct {
	Configs map[string]*string `json:"configs"`
}

// ReassignRequest is the body of PUT
// /v1/topics/{topic}/partitions/{partition}/replicas.
type ReassignRequest struct {
	Replicas []int32 `json:"replicas"`
}

// legalTopicName: 1 to 249 characters of [a-zA-Z0-9._-].
func legalTopicName(name string) bool {
	if len(name) == 0 || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
