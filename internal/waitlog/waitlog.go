// Package waitlog summarizes what a stop is waiting for, for its log:
// things in flight grouped by what they are, each group with its count and
// its oldest's age, e.g. "handling Fetch: 2 (oldest 1.2s); reading: 1
// (oldest 1m0s)". The Kafka listener's and the HTTP servers' slow stops
// log it (issue 19: steps of a 300,000-partition exit took seconds, and
// nothing named what they waited for). It starts no goroutines and holds
// no locks.
package waitlog

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Groups counts things in flight by name. The zero value is ready.
type Groups struct {
	groups map[string]*group
}

type group struct {
	n      int
	oldest time.Duration
}

// Add counts one thing named name (cut to MaxName bytes: names longer
// share their group), in flight for age.
func (g *Groups) Add(name string, age time.Duration) {
	name = name[:min(len(name), MaxName)]
	if g.groups == nil {
		g.groups = map[string]*group{}
	}
	x := g.groups[name]
	if x == nil {
		x = &group{}
		g.groups[name] = x
	}
	x.n++
	x.oldest = max(x.oldest, age)
}

// MaxListed bounds the groups String lists, and MaxName each name's
// length: names can come from clients (an HTTP request's path), and one
// stop's log line must not grow with what they send.
const (
	MaxListed = 10
	MaxName   = 128
)

// String is the groups, most first (then by name): "name: n (oldest
// age)", separated by "; ", at most MaxListed of them ("; 4 more groups"
// after).
func (g *Groups) String() string {
	names := make([]string, 0, len(g.groups))
	for name := range g.groups {
		names = append(names, name)
	}
	slices.SortFunc(names, func(x, y string) int {
		if d := g.groups[y].n - g.groups[x].n; d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	var b strings.Builder
	for i, name := range names[:min(len(names), MaxListed)] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %d (oldest %v)", name, g.groups[name].n, g.groups[name].oldest.Round(time.Millisecond))
	}
	if more := len(names) - MaxListed; more > 0 {
		fmt.Fprintf(&b, "; %d more groups", more)
	}
	return b.String()
}
