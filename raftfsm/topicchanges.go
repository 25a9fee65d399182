package raftfsm

import "iter"

// maxTopicChangeBatches bounds how many batches an image remembers the
// changed topic names of: a reader further behind looks at every topic.
const maxTopicChangeBatches = 1024

// topicChanges is the names of the topics one applied batch created,
// changed or deleted, linked to the batches before it. Published images
// share the list; nothing in it changes once published.
type topicChanges struct {
	index uint64 // the batch's last applied index (its image's Index)
	names []string
	prev  *topicChanges
	depth int // batches in the list up to this one
}

// TopicsChangedSince yields the names of the topics created, changed or
// deleted after the image at index since up to img (a name may come more
// than once), so a reader that applied that image can look at these topics
// alone. ok is false when img does not remember that far back (then every
// topic may have changed), when since is not an earlier index, or for an
// image the FSM did not make.
func (img *Image) TopicsChangedSince(since uint64) (names iter.Seq[string], ok bool) {
	if !img.tracked || since < img.changesFrom || since > img.Index {
		return nil, false
	}
	return func(yield func(string) bool) {
		for c := img.changes; c != nil && c.index > since; c = c.prev {
			for _, name := range c.names {
				if !yield(name) {
					return
				}
			}
		}
	}, true
}

// noteTopicChanges records that the batch that made img from base changed
// the named topics.
func (img *Image) noteTopicChanges(base *Image, names []string) {
	if len(names) == 0 {
		return
	}
	prev, depth := base.changes, 1
	if prev != nil {
		depth = prev.depth + 1
	}
	if depth > maxTopicChangeBatches {
		// Start a new list: images from here on remember from base.
		prev, depth, img.changesFrom = nil, 1, base.Index
	}
	img.changes = &topicChanges{index: img.Index, names: names, prev: prev, depth: depth}
}
