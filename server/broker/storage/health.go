package storage

import (
	"fmt"
	"strings"
	"sync"
)

// Health is what the recovery loop last saw: the partitions whose log
// failed, the first one's reason, and the reserve's refusal. Safe for
// concurrent use; the zero value is healthy.
type Health struct {
	mu     sync.Mutex
	failed []string // "topic-partition", sorted
	cause  string   // Reason of the first
	disk   error    // Guard.Err: below --min-free-disk
}

func (h *Health) setDisk(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disk = err
}

func (h *Health) set(failed []string, cause string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed, h.cause = failed, cause
}

// Count is the number of failed partitions.
func (h *Health) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failed)
}

// Err returns nil when no partition failed and the disk is above the
// reserve, otherwise an ErrStorage naming (a few of) the failed
// partitions, or the reserve's refusal.
func (h *Health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failed) == 0 {
		return h.disk
	}
	names := h.failed
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(h.failed)-5)
	}
	return fmt.Errorf("%w: %d partition(s) refuse writes (%s%s): %s", ErrStorage, len(h.failed),
		strings.Join(names, ", "), more, h.cause)
}
