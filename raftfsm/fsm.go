package raftfsm

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// fsm is the metadata state machine. Raft calls Apply, Snapshot and Restore
// from one goroutine; image() and appliedIndex() are safe for concurrent use.
//
// Each applied command commits its key changes and the applied index in one
// badger transaction, then publishes a new immutable image. Entries at or
// below the persisted applied index are skipped, so replaying the log after a
// restart changes nothing.
type fsm struct {
	db      *badger.DB
	log     *slog.Logger
	images  imageHolder
	applied atomic.Uint64
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(db *badger.DB, log *slog.Logger) (*fsm, error) {
	img, applied, err := loadImage(db)
	if err != nil {
		return nil, err
	}
	f := &fsm{db: db, log: log}
	f.applied.Store(applied)
	f.images.publish(img)
	return f, nil
}

func (f *fsm) image() (*Image, <-chan struct{}) { return f.images.load() }

func (f *fsm) appliedIndex() uint64 { return f.applied.Load() }

// Apply applies one committed command. It returns the command's result or
// its error; nil for a skipped (already applied) index.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Index <= f.applied.Load() {
		return nil
	}
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		f.log.Warn("raftfsm: skipping undecodable command", "index", l.Index, "err", err)
		return err
	}
	base, _ := f.images.load()
	ch := &change{base: base, next: base.next(l.Index), index: l.Index}
	res, err := ch.apply(cmd)
	if err != nil {
		return err
	}
	if err := commitWrites(f.db, l.Index, ch.writes); err != nil {
		// The state machine cannot skip a committed command and stay
		// consistent with its peers: stop here, a restart replays the log.
		panic(fmt.Sprintf("raftfsm: apply index %d: %v", l.Index, err))
	}
	f.applied.Store(l.Index)
	f.images.publish(ch.next)
	return res
}

// change is one command being applied: the next image (maps copied, values
// shared until replaced) and the badger writes that go with it.
type change struct {
	base   *Image
	next   *Image
	index  uint64
	writes []write
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
	case cmd.AllocateProducerIDs != nil:
		return c.allocateProducerIDs(cmd.AllocateProducerIDs)
	case cmd.InitCluster != nil:
		return c.initCluster(cmd.InitCluster)
	}
	return nil, fmt.Errorf("%w: empty envelope", ErrInvalidCommand)
}

func (c *change) putTopic(t *Topic) {
	c.next.Topics[t.Name] = t
	c.writes = append(c.writes, write{topicKey(t.Name), mustJSON(t)})
}

func (c *change) putBroker(b *Broker) {
	c.next.Brokers[b.ID] = b
	c.writes = append(c.writes, write{brokerKey(b.ID), mustJSON(b)})
}

// Snapshot captures the state at the current applied index; see snapshot.go.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) { return f.snapshot() }

// Restore replaces the state with a snapshot's; see snapshot.go.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.restore(rc)
}
