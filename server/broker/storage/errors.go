package storage

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrStorage: a partition's log refuses writes after a write or fsync
// failed (disk full, I/O error), or the disk is below the reserve. Both
// front doors map it in their one error table (HTTP 507, Kafka
// KAFKA_STORAGE_ERROR); package broker re-exports it as broker.ErrStorage.
var ErrStorage = errors.New("storage error")

// PartitionErr turns a log's sticky error into the message clients see:
// the partition and the system's reason, no file paths.
func PartitionErr(topic string, index int32, err error) error {
	return fmt.Errorf("%w on %s-%d: %s; writes resume by themselves once the disk takes them again",
		ErrStorage, topic, index, Reason(err))
}

// Reason is the system's reason for a storage error ("no space left on
// device"), without the paths the full error names.
func Reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "I/O error"
}
