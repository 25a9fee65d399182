package groups

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/runnel/runnel/api"
)

// Lag sampling: every groupLagSampleEvery the coordinator computes each of
// its groups' lag per topic (log end minus committed offset, summed over
// partitions) for runnel_group_lag{group,topic}, the UI's lag series and
// the list endpoint.

// lagSample is a group's total lag at a sample, with the fingerprint of the
// committed offsets it was computed from.
type lagSample struct {
	total  int64
	commit uint64
}

// commitFingerprint identifies a set of committed offsets (order-free), so a
// sample taken before a commit, a reset or a restart's reload is not served
// for the offsets after it.
func commitFingerprint(offs map[tp]int64) uint64 {
	sum := uint64(len(offs))
	for t, off := range offs {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", t.Topic, t.Partition, off)
		sum += h.Sum64()
	}
	return sum
}

// committedOffsets copies a group's committed offsets under its lock.
func committedOffsets(g *group) (map[tp]int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	offs := make(map[tp]int64, len(g.offsets))
	for t, e := range g.offsets {
		offs[t] = e.Offset
	}
	return offs, g.state == stateDead
}

// lagNow is a group's total lag computed now, with its fingerprint.
func (c *Coordinator) lagNow(ctx context.Context, g *group) (lagSample, map[string]int64, bool) {
	offs, dead := committedOffsets(g)
	if dead {
		return lagSample{}, nil, false
	}
	byTopic := map[string]int64{}
	s := lagSample{commit: commitFingerprint(offs)}
	for t, off := range offs {
		res, err := c.read(ctx, t, api.OffsetLatest, 1, 1)
		if err != nil {
			continue
		}
		byTopic[t.Topic] += max(0, res.HighWatermark-off)
	}
	for _, l := range byTopic {
		s.total += l
	}
	return s, byTopic, true
}

// listedLag is the lag the group list shows: the last sample while the
// committed offsets are those it was computed from, else computed now (a
// group not sampled yet, or committed, reset or reloaded since), so the list
// agrees with the group's own page.
func (c *Coordinator) listedLag(ctx context.Context, g *group, samples map[string]lagSample) int64 {
	offs, _ := committedOffsets(g)
	if s, ok := samples[g.name]; ok && s.commit == commitFingerprint(offs) {
		return s.total
	}
	s, _, _ := c.lagNow(ctx, g)
	return s.total
}

// sampleLag computes the lag of every group coordinated here.
func (c *Coordinator) sampleLag(ctx context.Context) {
	totals := map[string]lagSample{}
	for _, g := range c.snapshot() {
		if ctx.Err() != nil {
			return
		}
		s, byTopic, ok := c.lagNow(ctx, g)
		if !ok {
			continue
		}
		totals[g.name] = s
		c.b.SetGroupLag(g.name, byTopic)
	}
	c.mu.Lock()
	gone := c.lags
	c.lags = totals
	c.mu.Unlock()
	for name := range gone {
		if _, ok := totals[name]; !ok { // deleted, or coordinated elsewhere now
			c.b.ForgetGroupLag(name)
		}
	}
}

// cachedLags are the lags of the last sample.
func (c *Coordinator) cachedLags() map[string]lagSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lags
}
