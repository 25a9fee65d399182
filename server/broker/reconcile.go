package broker

import (
	"errors"
	"fmt"
	"iter"

	"github.com/runnel/runnel/raftfsm"
)

// Reconcile: applying a metadata image to the hosted partitions (the one
// image apply; see the package doc). It holds Broker.mu for writing and
// touches no disk: logs open on first use (lazylog.go) and the logs of
// deleted replicas are deleted off the lock (deletions.go).

// Reconcile makes the hosted partitions match img: delete what is gone,
// apply leadership and config changes to the partitions made already, make
// the ones this broker follows (their fetchers start). The rest are made on
// first use, from the image (hosting.go). After the first, it looks only at
// the topics changed since the image it applied last (and at those that
// failed then), when img remembers that far back: its cost follows the
// change, not the number of topics.
func (b *Broker) Reconcile(img *raftfsm.Image) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	// Never go back to an older image: it would drop topics created since
	// (deleting their logs) and hand leaders back older leader epochs.
	if img.Index < b.applied {
		return nil
	}
	old := b.img
	changed, ok := img.TopicsChangedSince(b.applied)
	if old == nil || !ok {
		changed = b.everyTopicLocked(old, img)
	}
	b.applied, b.img = img.Index, img
	b.hostedCount.Store(-1) // counted again when asked
	retry := b.retry
	b.retry = map[string]bool{}
	var errs []error
	reconcileOne := func(name string) {
		if err := b.reconcileTopicLocked(old, img, name); err != nil {
			errs = append(errs, err)
			b.retry[name] = true
		}
	}
	for name := range changed {
		delete(retry, name)
		reconcileOne(name)
	}
	for name := range retry {
		reconcileOne(name)
	}
	return errors.Join(errs...)
}

// everyTopicLocked yields the names of every topic of old and of img and
// every topic with partitions made: what a full reconcile looks at.
func (b *Broker) everyTopicLocked(old, img *raftfsm.Image) iter.Seq[string] {
	return func(yield func(string) bool) {
		for name := range b.topics {
			if _, ok := img.Topics.Lookup(name); !ok && !yield(name) {
				return
			}
		}
		if old != nil {
			for name := range old.Topics.All() {
				_, made := b.topics[name]
				if _, ok := img.Topics.Lookup(name); !ok && !made && !yield(name) {
					return
				}
			}
		}
		for name := range img.Topics.All() {
			if !yield(name) {
				return
			}
		}
	}
}

// reconcileTopicLocked makes the hosted partitions of the topic called name
// match img: deleted (or deleted and created again under a new id), or
// hosted as img places it. old is the image applied before (nil at the
// first reconcile): where its topic of that name placed partitions here
// that were never made, their directories are deleted with the topic. A
// name may come more than once.
func (b *Broker) reconcileTopicLocked(old, img *raftfsm.Image, name string) error {
	t, ok := img.Topics.Lookup(name)
	var errs []error
	ht, hosted := b.topics[name]
	if hosted && (!ok || t.ID != ht.id) {
		for _, p := range ht.parts {
			b.fetches.forget(p)
			p.wake()
			b.deleteLater(name, p.index, p) // off b.mu (deletions.go)
		}
		delete(b.topics, name)
	}
	var was *raftfsm.Topic
	if old != nil {
		was, _ = old.Topics.Lookup(name)
	}
	if was != nil && (!ok || t.ID != was.ID) {
		for i, pm := range was.Partitions {
			if !containsID(pm.Replicas, b.id) || hosted && ht.id == was.ID && ht.parts[int32(i)] != nil {
				continue // not here, or deleted above
			}
			b.deleteLater(name, int32(i), nil)
		}
		was = nil
	}
	if ok {
		if err := b.hostTopicLocked(was, t); err != nil {
			errs = append(errs, fmt.Errorf("host topic %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// hostTopicLocked applies t's metadata and config to the partitions of t
// made already, makes those this broker follows (their fetchers start),
// and deletes the replicas moved away. was is the same topic as the image
// applied before had it (nil: none, or another topic of that name). It
// touches no disk but to delete: a log is created by its first use
// (lazylog.go), so creating topics never holds b.mu across filesystem
// calls.
func (b *Broker) hostTopicLocked(was, t *raftfsm.Topic) error {
	ht := b.topics[t.Name]
	if ht != nil && ht.applied == t || ht == nil && was == t {
		return nil // images share unchanged topics: nothing to do
	}
	if ht != nil {
		ht.setConfigs(t, b)
	}
	for i, pm := range t.Partitions {
		idx := int32(i)
		var p *Partition
		if ht != nil {
			p = ht.parts[idx]
		}
		if !containsID(pm.Replicas, b.id) {
			if p != nil {
				b.dropReplicaLocked(ht, idx) // reassigned away
			} else if was != nil && i < len(was.Partitions) && containsID(was.Partitions[i].Replicas, b.id) {
				b.deleteLater(t.Name, idx, nil)
				b.logger.Info("replica reassigned away, deleting its log", "topic", t.Name, "partition", idx)
			}
			continue
		}
		if p == nil {
			// A replica this broker follows is made now: its fetcher
			// replicates from the leader whether anyone asks or not. A
			// leader's (or a leaderless one's) waits for its first use.
			if pm.Leader >= 0 && pm.Leader != b.id {
				b.partitionLocked(t, idx)
				ht = b.topics[t.Name]
			}
			continue
		}
		if p.setMeta(pm, b.id) {
			b.roleChanged(p)
		}
		p.setConfig(ht.pc)
		if err := p.setLogConfig(ht.cfg); err != nil {
			return fmt.Errorf("partition %d config: %w", idx, err)
		}
	}
	if ht != nil {
		ht.applied = t // not before: a failure is retried in full
	}
	return nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
