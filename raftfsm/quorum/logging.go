package quorum

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	hclog "github.com/hashicorp/go-hclog"
)

// hclogFor adapts slog for raft's hclog: hclog writes JSON lines into
// slogWriter, which re-logs each with its level and fields.
func hclogFor(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "raft",
		Level:      hclog.Info,
		JSONFormat: true,
		Output:     slogWriter{log: log},
	})
}

type slogWriter struct{ log *slog.Logger }

// Write handles one hclog JSON line. hclog serialises its writes.
func (w slogWriter) Write(p []byte) (int, error) {
	var fields map[string]any
	if err := json.Unmarshal(p, &fields); err != nil {
		w.log.Info(strings.TrimSpace(string(p)), "subsystem", "raft")
		return len(p), nil
	}
	msg, _ := fields["@message"].(string)
	level := hclogLevel(fields["@level"])
	if level == slog.LevelWarn && msg == "heartbeat timeout reached, starting election" && fields["last-leader-id"] == "" {
		// No leader was ever seen: every fresh start elects one; losing a
		// known leader (last-leader-id set) stays a warning.
		level = slog.LevelInfo
	}
	attrs := []slog.Attr{slog.String("subsystem", "raft")}
	for k, v := range fields {
		if !strings.HasPrefix(k, "@") {
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	w.log.LogAttrs(context.Background(), level, msg, attrs...)
	return len(p), nil
}

func hclogLevel(v any) slog.Level {
	switch v {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
