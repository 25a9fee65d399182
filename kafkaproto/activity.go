package kafkaproto

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/internal/waitlog"
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
	var g waitlog.Groups
	for _, a := range acts {
		p := connPhase(a.phase.Load())
		name := p.String()
		if p == phaseHandling {
			name += " " + kmsg.NameForKey(int16(a.key.Load()))
		}
		g.Add(name, now.Sub(time.Unix(0, a.since.Load())))
	}
	return g.String()
}
