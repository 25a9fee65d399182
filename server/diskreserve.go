package server

import (
	"fmt"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker/storage"
)

// metadataDiskReserveWarning says, when not empty, that the partitions'
// reserve (--min-free-disk, at most a tenth of their filesystem) is not
// above the free space the metadata state store keeps
// (raftfsm.StateDiskFloor, below which the node fail-stops): on a disk
// they share, partitions filling it would stop the node where refusing
// appends was meant.
func metadataDiskReserveWarning(partitionsDir string, minFreeDisk int64) string {
	reserve, ok := storage.Reserve(partitionsDir, minFreeDisk)
	if !ok || reserve > raftfsm.StateDiskFloor {
		return ""
	}
	return fmt.Sprintf("the partitions keep %d bytes free on their disk (--min-free-disk %d, at most a tenth of the disk), "+
		"not above the %d the metadata state store needs: if it shares that disk, partitions filling it stop the node "+
		"instead of only refusing appends; raise --min-free-disk or give the data dir a bigger disk", reserve, minFreeDisk, raftfsm.StateDiskFloor)
}
