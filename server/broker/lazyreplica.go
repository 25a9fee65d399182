package broker

import (
	"fmt"
	"slices"
)

// A leader answers its followers' fetches of a log that is unopened and
// holds no record without opening it (issue 19): with replication, every
// follower fetch used to open the leader's log, so a node held open every
// log it led however idle. The follower's position is taken as for any
// fetch (FollowerFetched against the log's base), so its lag budget stays
// fresh and the high watermark is right when the log opens at its first
// write. Notifications need no log either (Hosted).

// Hosted returns the hosted replica without opening its log (Lookup opens
// it): what waits for its changes needs no log.
func (b *Broker) Hosted(topic string, idx int32) (*Partition, error) { return b.lookup(topic, idx) }

// FollowerFetchUnopened answers follower replicaID's fetch at offset
// (leader epoch leaderEpoch) of a partition hosted here whose log is
// unopened and empty: at base, its start and end and high watermark, or
// with the error the usual path would give (not the leader, a fenced or
// unknown epoch), without opening it. ok is false when the fetch must be
// served as usual (the log is open or holds records, the partition is not
// hosted, the follower is outside the ISR): that path opens the log.
func (b *Broker) FollowerFetchUnopened(topic string, idx, replicaID int32, offset int64, leaderEpoch int32) (base int64, ok bool, err error) {
	p, err := b.hostedReconciled(topic, idx)
	if err != nil {
		return 0, false, nil
	}
	base, empty := unopenedEmpty(p)
	// A follower outside the ISR is served by the usual path, which opens
	// the log: the ISR loop that takes it back looks at open logs only.
	if !empty || !p.inISR(replicaID) {
		return 0, false, nil
	}
	if leader := p.leader.Load(); leader != b.id {
		return base, true, fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeader, topic, idx, leader)
	}
	if err := p.CheckLeaderEpoch(leaderEpoch); err != nil {
		return base, true, err
	}
	return base, true, p.FollowerFetched(replicaID, offset, leaderEpoch)
}

// leaderEnd is the log end a follower's position is checked against: an
// unopened empty log's base.
func (p *Partition) leaderEnd() int64 {
	if log := p.log(); log != nil {
		return log.EndOffset()
	}
	base, _ := unopenedEmpty(p)
	return base
}

// inISR reports whether broker id is in the partition's ISR.
func (p *Partition) inISR(id int32) bool {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	return slices.Contains(p.repl.isr, id)
}
