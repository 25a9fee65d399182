package server

import "fmt"

// The segment file budget (--max-open-files, issue 19). Every partition
// replica a broker hosts has a segment file its appends and reads go
// through; segments.FileCache keeps at most --max-open-files of them open
// and closes the least recently used one to open another. With 100,000
// partitions behind 1,024 descriptors every append to a log not used
// lately reopened and closed a file (23 us an append in
// BenchmarkAppendEachPartition against 9 us with its file open), and a new
// leader's first produce after a broker's kill -9 carries tens of
// thousands of partitions. So by default the cache gets what the
// process's descriptor limit leaves after a reserve for everything else.
const (
	// fileReserveOther is the descriptors kept besides the segment files
	// and the connection bounds: HTTP connections, listeners, the metadata
	// store (badger's tables and value log, raft-wal's segments), state
	// and checkpoint files being written, and segment files readers pin
	// past the cache's bound while their answers are sent.
	fileReserveOther = 2048
	// minSegmentFiles is the least a derived budget is taken as good for,
	// and the bound of releases before: under a descriptor limit of
	// 2,048 the start warns.
	minSegmentFiles = 1024
	// maxSegmentFiles bounds a derived budget under an unlimited or huge
	// descriptor limit; each open file costs kernel memory.
	maxSegmentFiles = 1 << 20
)

// segmentFileBudget returns the number of segment files to keep open: cfg's
// MaxOpenFiles when set, else what limit (the process's RLIMIT_NOFILE; 0
// when unknown) leaves after the connection bounds and fileReserveOther,
// and at least 1,024 (half the limit when that is less). warn, when not
// empty, says the limit leaves too little room.
func segmentFileBudget(cfg Config, limit uint64) (files int, warn string) {
	if limit == 0 { // not known (not a Unix system)
		if cfg.MaxOpenFiles > 0 {
			return cfg.MaxOpenFiles, ""
		}
		return minSegmentFiles, ""
	}
	reserve := uint64(max(cfg.KafkaMaxConnections, 0) + max(cfg.InterBrokerMaxConnections, 0) + fileReserveOther)
	room := 0
	if limit > reserve {
		room = int(min(limit-reserve, maxSegmentFiles))
	}
	if cfg.MaxOpenFiles > 0 {
		if cfg.MaxOpenFiles > room {
			return cfg.MaxOpenFiles, fmt.Sprintf("--max-open-files=%d leaves too few of the process's %d file descriptors for connections and the metadata store (%d wanted: --kafka-max-connections, --inter-broker-max-connections and %d more); raise the limit (LimitNOFILE, ulimit -n) or lower --max-open-files", cfg.MaxOpenFiles, limit, reserve, fileReserveOther)
		}
		return cfg.MaxOpenFiles, ""
	}
	if room >= minSegmentFiles {
		return room, ""
	}
	// The reserve counts every connection the bounds allow, which a
	// node seldom has: under a limit of a few thousand (4,096 is a common
	// hard limit) it keeps the 1,024 files of releases before, with half
	// the descriptors left for the rest, and says nothing (a node with
	// few partitions needs no more). Only a limit too low for that warns.
	files = max(room, min(minSegmentFiles, int(limit/2)))
	if files < minSegmentFiles {
		return files, fmt.Sprintf("the process's limit of %d file descriptors leaves room for %d segment files (%d wanted for connections and the metadata store); partitions beyond that reopen a file for each append or read: raise the limit (LimitNOFILE, ulimit -n)", limit, files, reserve)
	}
	return files, ""
}
