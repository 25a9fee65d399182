package waitlog

import (
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
