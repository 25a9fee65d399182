package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

const (
	progressWidth    = 30                     // cells of the bar itself
	progressInterval = 100 * time.Millisecond // at most ten redraws a second
)

// progressBar redraws one status line on w with '\r'. A nil *progressBar is
// valid and draws nothing. It is used by one goroutine.
type progressBar struct {
	w       io.Writer
	total   int64
	start   time.Time
	drawn   time.Time
	lastLen int
	now     func() time.Time
}

func newProgressBar(w io.Writer, total int64) *progressBar {
	b := &progressBar{w: w, total: total, now: time.Now}
	b.start = b.now()
	return b
}

// update redraws the line unless the last redraw was less than
// progressInterval ago.
func (b *progressBar) update(done, records int64) {
	if b == nil {
		return
	}
	now := b.now()
	if !b.drawn.IsZero() && now.Sub(b.drawn) < progressInterval {
		return
	}
	b.draw(done, records, now)
}

// finish draws the final state and ends the line.
func (b *progressBar) finish(done, records int64) {
	if b == nil {
		return
	}
	b.draw(done, records, b.now())
	fmt.Fprintln(b.w)
}

func (b *progressBar) draw(done, records int64, now time.Time) {
	b.drawn = now
	line := renderProgress(done, b.total, records, now.Sub(b.start))
	pad := ""
	if n := b.lastLen - len(line); n > 0 {
		pad = strings.Repeat(" ", n) // blank the tail of a longer previous line
	}
	b.lastLen = len(line)
	fmt.Fprint(b.w, "\r"+line+pad)
}

// renderProgress formats "[#####.....]  50%  1.0 MiB/2.0 MiB  1200 records  3s".
func renderProgress(done, total, records int64, elapsed time.Duration) string {
	done = min(max(done, 0), total)
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	filled := int(frac * progressWidth)
	return fmt.Sprintf("[%s%s] %3d%%  %s/%s  %d records  %s",
		strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled),
		int(frac*100), formatBytes(done), formatBytes(total), records,
		elapsed.Round(time.Second))
}
