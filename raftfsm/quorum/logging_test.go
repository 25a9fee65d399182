package quorum

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRaftLogsReachSlog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hl := hclogFor(log)
	hl.Warn("peer unreachable", "peer", "2")
	hl.Debug("chatter") // below hclog's Info level: dropped
	out := buf.String()
	for _, want := range []string{"level=WARN", `msg="peer unreachable"`, "peer=2", "subsystem=raft"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "chatter") {
		t.Errorf("debug line logged: %q", out)
	}
}
