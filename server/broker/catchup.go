package broker

import (
	"context"
	"time"
)

// metaMissWait bounds how long a node waits for its metadata to catch up
// with the active controller before it answers that a topic is unknown.
// Followers trail the controller by milliseconds; the wait only runs on a
// miss, so a topic that does exist is never delayed.
const metaMissWait = 2 * time.Second

// CatchUpOnMiss is called before answering "unknown topic": it waits (at
// most metaMissWait) until this node has applied what the active controller
// had committed, so a topic created through any node, once that call
// returned, is found on every node, through both front doors. It reports
// whether the image changed (worth looking again).
func CatchUpOnMiss(ctx context.Context, meta Metadata) bool {
	ctx, cancel := context.WithTimeout(ctx, metaMissWait)
	defer cancel()
	before, _ := meta.Image()
	if err := meta.CatchUp(ctx); err != nil {
		return false
	}
	after, _ := meta.Image()
	return after != before
}
