package broker

import "slices"

// Online partition reassignment (raftfsm.ReassignPartition). Starting one
// adds the target replicas to the partition's replica set: brokers that are
// new to it open the log and replicate from the leader through the usual
// fetcher, and the leader puts them in the ISR (wantedISR) once they are
// caught up. That ISR change completes the reassignment in the metadata;
// brokers no longer in the replica set then stop fetching, close and delete
// their copy (dropReplicaLocked, called by hostTopicLocked).

// syncFollowersLocked makes a leader's follower table match the replica set
// without a leadership change: a new replica starts unknown with a fresh
// lag budget, a dropped one is forgotten. Called with p.repl.mu held.
func (p *Partition) syncFollowersLocked(replicas []int32) {
	now := p.wallNow()
	for _, r := range replicas {
		if p.repl.followers.get(r) == nil && r != p.repl.self {
			p.repl.followers = append(p.repl.followers, followerEntry{id: r, followerState: newFollowerState(now)})
		}
	}
	p.repl.followers = slices.DeleteFunc(p.repl.followers, func(e followerEntry) bool {
		return !slices.Contains(replicas, e.id)
	})
}

// dropReplicaLocked stops hosting partition idx of ht if it is hosted here:
// no more fetching, waiters woken, the log closed and deleted. Called with
// b.mu held.
func (b *Broker) dropReplicaLocked(ht *hostedTopic, idx int32) {
	p, ok := ht.parts[idx]
	if !ok {
		return
	}
	delete(ht.parts, idx)
	b.fetches.forget(p)
	p.wake()
	b.deleteLater(p.topic, idx, p)
	b.logger.Info("replica reassigned away, deleting its log", "topic", p.topic, "partition", idx)
}
