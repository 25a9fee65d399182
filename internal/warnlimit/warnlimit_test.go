package warnlimit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// One line per period; the next line counts the ones held back.
func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	w := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for range 5 {
		w.Warn("refused", "remote", "x")
	}
	if n := strings.Count(buf.String(), "refused"); n != 1 {
		t.Fatalf("%d lines in one period:\n%s", n, buf.String())
	}
	w.last = w.last.Add(-2 * time.Hour) // the period is over
	w.Warn("refused", "remote", "y")
	if !strings.Contains(buf.String(), "suppressed_since_last=4") {
		t.Fatalf("the second line does not count the 4 held back:\n%s", buf.String())
	}
}
