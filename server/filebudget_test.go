package server

import (
	"strings"
	"testing"
)

// The segment file budget: by default what the descriptor limit leaves
// after the connection bounds and the reserve; a flag's value as given,
// with a warning when the limit leaves too little beside it.
func TestSegmentFileBudget(t *testing.T) {
	def := DefaultConfig()
	reserve := def.KafkaMaxConnections + def.InterBrokerMaxConnections + fileReserveOther
	set := func(n int) Config { c := def; c.MaxOpenFiles = n; return c }
	for _, tc := range []struct {
		name  string
		cfg   Config
		limit uint64
		files int
		warn  string // a substring; "" for none
	}{
		{"derived at 20,000", def, 20_000, 20_000 - reserve, ""},
		{"derived at 65,536", def, 65_536, 65_536 - reserve, ""},
		{"derived, unlimited", def, 1 << 62, maxSegmentFiles, ""},
		{"derived, limit leaves more than before", def, uint64(reserve + 1500), 1500, ""},
		{"derived, limit leaves less than before", def, uint64(reserve + 500), 1024, ""},
		{"derived, a common hard limit", def, 4096, 1024, ""},
		{"derived, limit of 2,048", def, 2048, 1024, ""},
		{"derived, limit below 2,048", def, 1024, 512, "room for 512 segment files"},
		{"derived, limit unknown", def, 0, minSegmentFiles, ""},
		{"flag within the limit", set(4096), 65_536, 4096, ""},
		{"flag past the limit", set(30_000), 20_000, 30_000, "--max-open-files=30000 leaves too few"},
		{"flag, limit unknown", set(4096), 0, 4096, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, warn := segmentFileBudget(tc.cfg, tc.limit)
			if files != tc.files {
				t.Errorf("files %d, want %d", files, tc.files)
			}
			if (tc.warn == "") != (warn == "") || !strings.Contains(warn, tc.warn) {
				t.Errorf("warning %q, want one with %q", warn, tc.warn)
			}
		})
	}
	// The connection bounds count: more Kafka connections, fewer files.
	c := def
	c.KafkaMaxConnections += 5000
	if files, _ := segmentFileBudget(c, 20_000); files != 20_000-reserve-5000 {
		t.Errorf("with 5,000 more Kafka connections: %d files, want %d", files, 20_000-reserve-5000)
	}
}
