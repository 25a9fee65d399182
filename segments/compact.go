package segments

const cleanedSuffix = ".cleaned"

// compactLocked is filled in by the compaction change.
func (l *Log) compactLocked(nowMs int64) error { return nil }
