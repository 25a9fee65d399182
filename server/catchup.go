package server

import (
	"context"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// metaMissWait bounds how long a node waits for its metadata to catch up
// with the active controller before it answers that a topic is unknown.
// Followers trail the controller by milliseconds; the wait only runs on a
// miss, so a topic that does exist is never delayed.
const metaMissWait = 2 * time.Second

// catchUpOnMiss is called before answering "unknown topic": it waits (at
// most metaMissWait) until this node has applied what the active controller
// had committed, so a topic created through any node, once that call
// returned, is found on every node, through both front doors. It reports
// whether the image changed (worth looking again).
func catchUpOnMiss(ctx context.Context, meta *raftfsm.Node) bool {
	ctx, cancel := context.WithTimeout(ctx, metaMissWait)
	defer cancel()
	before, _ := meta.Image()
	if err := meta.CatchUp(ctx); err != nil {
		return false
	}
	after, _ := meta.Image()
	return after != before
}

// lookupTopic finds a topic in this node's metadata image, catching up with
// the active controller first when it is not there.
func (s *Server) lookupTopic(ctx context.Context, name string) (*raftfsm.Image, *raftfsm.Topic, bool) {
	img, _ := s.meta.Image()
	if t, ok := img.Topics.Lookup(name); ok {
		return img, t, true
	}
	if !catchUpOnMiss(ctx, s.meta) {
		return img, nil, false
	}
	img, _ = s.meta.Image()
	t, ok := img.Topics.Lookup(name)
	return img, t, ok
}

// CatchUpMetadata implements kafkaproto.MetadataCatchUp.
func (k *kafkaBackend) CatchUpMetadata(ctx context.Context) bool {
	return catchUpOnMiss(ctx, k.s.meta)
}
