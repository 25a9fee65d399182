package kafkaproto

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// closeReportAfter is how long Close waits for the connections before it
// logs what they are doing, and again each time as long after.
const closeReportAfter = time.Second

// activity is what a connection's goroutine is doing, so that a slow Close
// can say what it waits for: the Kafka listener's step of a
// 300,000-partition node's exit took 1.6-5.8 s, and nothing named what
// (issue 19). Written by the connection's goroutine, read by Close.
type activity struct {
	phase atomic.Int32 // a connPhase
	key   atomic.Int32 // the API key being handled, in phaseHandling
	since atomic.Int64 // when the phase began (Unix nanoseconds)
}

type connPhase int32

const (
	phaseReading       connPhase = iota // waiting for or reading a request
	phaseHandling                       // running a request's handler
	phaseEndingSession                  // closing its fetch session
	phaseDraining                       // waiting for its writer to finish
)

func (p connPhase) String() string {
	switch p {
	case phaseHandling:
		return "handling"
	case phaseEndingSession:
		return "ending its fetch session"
	case phaseDraining:
		return "writing its last responses"
	default:
		return "reading"
	}
}

// set records that the connection began p (with key, in phaseHandling).
// A conn made without an activity (in tests) records nothing.
func (a *activity) set(p connPhase, key int16) {
	if a == nil {
		return
	}
	a.key.Store(int32(key))
	a.since.Store(time.Now().UnixNano())
	a.phase.Store(int32(p))
}

// describeBusy summarizes the activities, e.g. "handling Fetch: 2 (oldest
// 1.2s); ending its fetch session: 1 (oldest 0.8s)", most first.
func describeBusy(acts []*activity, now time.Time) string {
	type group struct {
		n      int
		oldest time.Duration
	}
	groups := map[string]*group{}
	for _, a := range acts {
		p := connPhase(a.phase.Load())
		name := p.String()
		if p == phaseHandling {
			name += " " + kmsg.NameForKey(int16(a.key.Load()))
		}
		g := groups[name]
		if g == nil {
			g = &group{}
			groups[name] = g
		}
		g.n++
		g.oldest = max(g.oldest, now.Sub(time.Unix(0, a.since.Load())))
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.SortFunc(names, func(x, y string) int {
		if d := groups[y].n - groups[x].n; d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %d (oldest %v)", name, groups[name].n, groups[name].oldest.Round(time.Millisecond))
	}
	return b.String()
}
