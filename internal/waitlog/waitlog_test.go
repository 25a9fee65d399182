package waitlog

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestGroupsMostFirstThenByName(t *testing.T) {
	var g Groups
	if got := g.String(); got != "" {
		t.Fatalf("empty: %q", got)
	}
	g.Add("reading", time.Minute)
	g.Add("handling Fetch", 1200*time.Millisecond)
	g.Add("handling Fetch", 300*time.Millisecond)
	g.Add("ending its fetch session", 2*time.Second)
	want := "handling Fetch: 2 (oldest 1.2s); ending its fetch session: 1 (oldest 2s); reading: 1 (oldest 1m0s)"
	if got := g.String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Names from clients (an HTTP request's path) do not grow the line without
// bound: at most MaxListed groups, each name cut to MaxName bytes.
func TestGroupsBounded(t *testing.T) {
	var g Groups
	long := strings.Repeat("p", 4<<10)
	for i := range 1000 {
		g.Add(fmt.Sprintf("GET /%d%s", i, long), time.Second) // distinct within MaxName
	}
	got := g.String()
	if !strings.HasSuffix(got, fmt.Sprintf("; %d more groups", 1000-MaxListed)) {
		t.Fatalf("the line does not say how many groups it left out: ...%s", got[max(0, len(got)-80):])
	}
	if bound := MaxListed*(MaxName+40) + 40; len(got) > bound {
		t.Fatalf("line of %d bytes for 1,000 names of 4 KiB, want at most %d", len(got), bound)
	}
}
