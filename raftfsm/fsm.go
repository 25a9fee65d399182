package raftfsm

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// FSM is the metadata state machine (package quorum runs it on raft). Raft
// calls ApplyBatch, Snapshot and Restore from one goroutine; Image and
// AppliedIndex are safe for concurrent use.
//
// Each batch of applied commands commits its key changes and the applied
// index in one badger transaction, then publishes a new immutable image. Entries at or
// below the persisted applied index are skipped, so replaying the log after a
// restart changes nothing.
type FSM struct {
	db      *badger.DB
	log     *slog.Logger
	images  imageHolder
	applied atomic.Uint64
	// broken: a snapshot restore began replacing the state and did not
	// complete; nothing applies until one does. FSM goroutine only.
	broken error
	// commitState writes a batch's changes with its applied index
	// (commitWrites; a test's fault).
	commitState func(db *badger.DB, index uint64, writes []write) error
	stop        storeFailure // a failed write of the state store (failstop.go)
}

var _ raft.BatchingFSM = (*FSM)(nil)

// NewFSM loads the state in db (opened with OpenBadger) and publishes its
// image; the FSM owns db from then on (Close closes it).
func NewFSM(db *badger.DB, log *slog.Logger) (*FSM, error) {
	img, applied, err := loadImage(db)
	if err != nil {
		return nil, err
	}
	f := &FSM{db: db, log: log, commitState: commitWrites, stop: storeFailure{failed: make(chan struct{})}}
	f.applied.Store(applied)
	f.images.publish(img)
	f.watchFlushes()
	return f, nil
}

// Image is the newest published image and a channel closed when a newer one
// is published.
func (f *FSM) Image() (*Image, <-chan struct{}) { return f.images.load() }

// AppliedIndex is the raft index of the last command applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Close closes the state store, once raft no longer calls the FSM; after
// a failure, only when the disk has room for it (closeAfterFailure).
func (f *FSM) Close() error {
	if f.stop.failure() != nil {
		return f.closeAfterFailure()
	}
	return f.db.Close()
}

// Apply applies one committed command. It returns the command's result or
// its error; nil for a skipped (already applied) index.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in order with one badger transaction
// and one published image for the whole batch. Entries that are not commands
// or at or below the applied index get a nil response. A rejected command
// changes nothing, not even the applied index: replayed, it is rejected again
// (Apply is deterministic).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	if f.broken != nil {
		// raft applies entries only after a restore succeeded; should it
		// not, applying on a half-replaced state would persist it.
		panic(fmt.Sprintf("raftfsm: apply after a failed snapshot restore: %v", f.broken))
	}
	out := make([]any, len(logs))
	applied := f.applied.Load()
	if f.stop.failure() != nil {
		return f.refuse(logs, applied, out)
	}
	base, _ := f.images.load()
	var ch *change // created at the first command to apply
	var last uint64
	for i, l := range logs {
		if l.Type != raft.LogCommand || l.Index <= applied {
			continue
		}
		cmd, err := DecodeCommand(l.Data)
		if errors.Is(err, ErrUnsupportedCommand) {
			f.stopAt(ch, last, l.Index, err)
		}
		if err != nil {
			f.log.Warn("raftfsm: refusing an invalid command", "index", l.Index, "err", err)
			out[i] = err
			continue
		}
		if ch == nil {
			ch = &change{img: base.next(l.Index)}
		}
		if out[i] = ch.applyAt(l.Index, cmd); !isError(out[i]) {
			last = l.Index
		}
	}
	if last == 0 {
		return out
	}
	if !f.commit(ch, base, last) {
		return f.refuse(logs, applied, out)
	}
	return out
}

// commit makes the batch applied through last durable and publishes it;
// false when the state store failed (the state machine stops: failstop.go).
func (f *FSM) commit(ch *change, base *Image, last uint64) bool {
	if err := checkDiskRoom(f.db.Opts().Dir); err != nil {
		f.storeFailed(fmt.Errorf("raftfsm: apply the metadata log through index %d: %w", last, err))
		return false
	}
	if err := ch.commit(f.db, f.commitState); err != nil {
		f.storeFailed(fmt.Errorf("raftfsm: apply the metadata log through index %d: write the state store: %w", last, err))
		return false
	}
	f.applied.Store(last)
	ch.img.noteTopicChanges(base, ch.topics)
	f.images.publish(ch.img)
	return true
}

// stopAt stops the node at a command it cannot apply (ErrUnsupportedCommand:
// written by a newer version). What the batch applied before it is
// committed first, so that the node, upgraded and restarted, resumes at
// this command. Skipping it, as an invalid command is skipped, would leave
// this node's metadata different from its upgraded peers'; a panic is the
// one stop raft's FSM interface allows (ApplyBatch cannot fail).
func (f *FSM) stopAt(ch *change, last, index uint64, err error) {
	if last != 0 {
		base, _ := f.images.load()
		f.commit(ch, base, last) // a failure is logged; the stop is the same
	}
	msg := fmt.Sprintf("raftfsm: cannot apply the metadata log at index %d (%v): "+
		"a newer runnel wrote it; upgrade this node to the version of the others and restart it", index, err)
	f.log.Error(msg)
	panic(msg)
}

func isError(v any) bool {
	_, ok := v.(error)
	return ok
}

// change is a batch of commands being applied to an unpublished image (its
// maps copied from the published one, the values shared until replaced),
// with the badger writes that go with it. Handlers validate before they
// change anything, so a rejected command leaves img and writes as they were.
type change struct {
	img    *Image
	index  uint64 // of the command being applied
	writes []write
	marks  []mark   // one per applied command, in order
	topics []string // the names of the topics put or deleted
}

// mark is where an applied command's writes end.
type mark struct {
	index uint64
	end   int
}

// applyAt applies one command at index and returns its result or error.
func (c *change) applyAt(index uint64, cmd Command) any {
	c.index = index
	n, nt := len(c.writes), len(c.topics)
	res, err := c.apply(cmd)
	if err != nil {
		c.writes, c.topics = c.writes[:n], c.topics[:nt]
		return err
	}
	c.img.Index = index
	c.marks = append(c.marks, mark{index, len(c.writes)})
	return res
}

// commit writes the batch with its last index in one transaction, or, when
// that is too big for badger, command by command, each with its own index:
// the applied index always matches the writes committed with it.
func (c *change) commit(db *badger.DB, commitWrites func(*badger.DB, uint64, []write) error) error {
	last := c.marks[len(c.marks)-1].index
	err := commitWrites(db, last, lastWrites(c.writes))
	if !errors.Is(err, badger.ErrTxnTooBig) || len(c.marks) == 1 {
		return err
	}
	start := 0
	for _, m := range c.marks {
		if err := commitWrites(db, m.index, lastWrites(c.writes[start:m.end])); err != nil {
			return err
		}
		start = m.end
	}
	return nil
}

// lastWrites keeps the last write of each key, in order.
func lastWrites(ws []write) []write {
	pos := make(map[string]int, len(ws))
	out := make([]write, 0, len(ws))
	for _, w := range ws {
		if i, ok := pos[w.key]; ok {
			out[i] = w
			continue
		}
		pos[w.key] = len(out)
		out = append(out, w)
	}
	return out
}

// apply is the one switch over the command kinds.
func (c *change) apply(cmd Command) (any, error) {
	switch {
	case cmd.CreateTopic != nil:
		return c.createTopic(cmd.CreateTopic)
	case cmd.DeleteTopic != nil:
		return c.deleteTopic(cmd.DeleteTopic)
	case cmd.AlterConfigs != nil:
		return c.alterConfigs(cmd.AlterConfigs)
	case cmd.CreatePartitions != nil:
		return c.createPartitions(cmd.CreatePartitions)
	case cmd.RegisterBroker != nil:
		return c.registerBroker(cmd.RegisterBroker)
	case cmd.SetBrokerState != nil:
		return c.setBrokerState(cmd.SetBrokerState)
	case cmd.ChangePartition != nil:
		return c.changePartition(cmd.ChangePartition)
	case cmd.ChangePartitions != nil:
		return c.changePartitions(cmd.ChangePartitions)
	case cmd.AllocateProducerIDs != nil:
		return c.allocateProducerIDs(cmd.AllocateProducerIDs)
	case cmd.InitCluster != nil:
		return c.initCluster(cmd.InitCluster)
	case cmd.ReassignPartition != nil:
		return c.reassignPartition(cmd.ReassignPartition)
	case cmd.UpsertUserScram != nil:
		return c.upsertUserScram(cmd.UpsertUserScram)
	case cmd.DeleteUser != nil:
		return c.deleteUser(cmd.DeleteUser)
	case cmd.CreateACLs != nil:
		return c.createACLs(cmd.CreateACLs)
	case cmd.DeleteACLs != nil:
		return c.deleteACLs(cmd.DeleteACLs)
	case cmd.CreateToken != nil:
		return c.createToken(cmd.CreateToken)
	case cmd.DeleteToken != nil:
		return c.deleteToken(cmd.DeleteToken)
	case cmd.SetQuotas != nil:
		return c.setQuotas(cmd.SetQuotas)
	case cmd.SetCommandVersion != nil:
		return c.setCommandVersion(cmd.SetCommandVersion)
	case cmd.ChangePartitionsBatch != nil:
		return c.changePartitionsBatch(cmd.ChangePartitionsBatch)
	}
	return nil, fmt.Errorf("%w: empty envelope", ErrInvalidCommand)
}

func (c *change) putTopic(t *Topic) {
	if c.img.load != nil {
		c.img.load.add(c.img.Topics.Get(t.Name), -1)
		c.img.load.add(t, 1)
	}
	c.img.Topics = c.img.Topics.With(t)
	c.topics = append(c.topics, t.Name)
	c.writes = append(c.writes, write{topicKey(t.Name), c.topicValue(t)})
}

// topicValue is t's stored form: binary once the cluster's command version
// is 2 (every node reads it), JSON before.
func (c *change) topicValue(t *Topic) []byte {
	if c.img.CommandVersion >= 2 {
		return appendTopicBinary(nil, t)
	}
	return topicJSON(t)
}

// putTopicChanged is putTopic for t, a version of old that differs only in
// the partitions at changed (which it may reorder): the load moves by those
// partitions alone.
func (c *change) putTopicChanged(old, t *Topic, changed []int32) {
	if c.img.load != nil {
		// A partition changed twice in one command counts once.
		slices.Sort(changed)
		changed = slices.Compact(changed)
		var leaders leaderDeltas
		for _, i := range changed {
			c.img.load.replace(&old.Partitions[i], &t.Partitions[i], &leaders)
		}
		leaders.applyTo(c.img.load)
	}
	c.img.Topics = c.img.Topics.With(t)
	c.topics = append(c.topics, t.Name)
	c.writes = append(c.writes, write{topicKey(t.Name), c.topicValue(t)})
}

func (c *change) putBroker(b *Broker) {
	c.img.Brokers[b.ID] = b
	c.writes = append(c.writes, write{brokerKey(b.ID), mustJSON(b)})
}

// Snapshot captures the state at the current applied index; see snapshot.go.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) { return f.snapshot() }

// Restore replaces the state with a snapshot's; see snapshot.go.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.restore(rc)
}
