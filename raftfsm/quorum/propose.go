package quorum

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nuid"
	"github.com/runnel/runnel/raftfsm"
)

// leaderLoop follows leadership changes; as leader of a cluster without id it
// proposes one. Every second it also lengthens the single-voter timeouts if
// the quorum has grown (on followers too, which get no notification).
func (n *Node) leaderLoop(ctx context.Context, notify <-chan bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n.tuneTimeouts()
		case leader := <-notify:
			n.log.Info("raftfsm: leadership changed", "leader", leader, "node", n.cfg.NodeID)
			if leader {
				n.ensureClusterID(ctx)
			}
		}
	}
}

// ensureClusterID proposes InitCluster until the image has a cluster id or
// this node is no longer leader.
func (n *Node) ensureClusterID(ctx context.Context) {
	for ctx.Err() == nil && n.raft.State() == raft.Leader {
		if err := n.await(n.raft.Barrier(defaultApplyTimeout)); err == nil {
			if img, _ := n.Image(); img.ClusterID != "" {
				return
			}
			actx, cancel := context.WithTimeout(ctx, defaultApplyTimeout)
			_, err = n.applyLocal(actx, raftfsm.Command{InitCluster: &raftfsm.InitCluster{ClusterID: nuid.Next()}})
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// maxCommandBytes bounds one encoded command, well inside what one badger
// transaction holds (see openBadger), for the log entry and its writes.
const maxCommandBytes = 1 << 20

// applyLocal proposes cmd through Raft on this node and waits until it is
// applied; ctx's deadline is the raft timeout. It returns the command's
// result (see each command) or its error (ErrTopicExists, ...); ErrNotLeader
// itself when this node does not lead (nothing was proposed). Apply
// (quorum.go) forwards to the leader.
func (n *Node) applyLocal(ctx context.Context, cmd raftfsm.Command) (any, error) {
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return nil, err
	}
	cmd, res, err := n.prepareCurrent(ctx, cmd, timeout)
	if err != nil {
		return nil, err
	}
	defer n.reserved.release(res)
	data, err := raftfsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	if len(data) > maxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, at most %d", raftfsm.ErrInvalidCommand, len(data), maxCommandBytes)
	}
	f := n.raft.Apply(data, timeout)
	// raft's timeout only bounds enqueueing: ctx also bounds commit and
	// apply, and Close ends the wait (see await). The caller waits on raft's
	// answer itself, not through a second goroutine: every wake-up between
	// the state machine and the caller is a scheduling delay on a loaded
	// machine, paid by every admin write (issue 19).
	select {
	case err = <-futureError(f):
	case <-n.done:
		return nil, raftfsm.ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("raftfsm: apply (outcome unknown): %w", ctx.Err())
	}
	if err != nil {
		return nil, raftError(err)
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// spawn runs fn in a goroutine that Close waits for; false once closing.
// fn must return when raft shuts down.
func (n *Node) spawn(fn func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
	return true
}

// prepare fills in what must be decided before proposing, so that applying
// stays deterministic: version (never above the cluster's), topic id,
// replica placement. It checks the
// command as the FSM will (checkCommand) and against Config.Limits before
// anything is allocated for it, and reserves the partitions it creates
// (release the reservation, possibly nil, once the outcome is known).
func (n *Node) prepare(cmd raftfsm.Command) (raftfsm.Command, *reservation, error) {
	if cmd.Version == 0 {
		// The lowest version that expresses it: in a rolling upgrade the
		// nodes not yet upgraded apply it too.
		cmd.Version = cmd.MinVersion()
	}
	if err := cmd.Check(); err != nil { // what the FSM checks again at apply
		return cmd, nil, err
	}
	img, _ := n.Image()
	if err := clusterApplies(img, cmd); err != nil {
		return cmd, nil, err
	}
	var as [][]int32
	var topic string
	var id [16]byte
	var count int
	switch {
	case cmd.CreateTopic != nil:
		ct := *cmd.CreateTopic
		if err := n.cfg.Limits.CheckTopic(ct.Partitions, ct.ReplicationFactor); err != nil {
			return cmd, nil, err
		}
		if ct.TopicID == ([16]byte{}) {
			ct.TopicID = newUUID()
		}
		if ct.Assignments == nil {
			placed, err := raftfsm.PlaceReplicas(img, ct.Partitions, ct.ReplicationFactor)
			if err != nil {
				return cmd, nil, err
			}
			ct.Assignments = placed
		}
		as = ct.Assignments
		cmd.CreateTopic = &ct
		topic, id, count = ct.Name, ct.TopicID, len(as)
	case cmd.CreatePartitions != nil:
		cp := *cmd.CreatePartitions
		t, ok := img.Topics.Lookup(cp.Topic)
		if !ok {
			return cmd, nil, fmt.Errorf("%w: %q", raftfsm.ErrUnknownTopic, cp.Topic)
		}
		have := int32(len(t.Partitions))
		if cp.Count <= have {
			return cmd, nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d", raftfsm.ErrInvalidPartitions, cp.Topic, have, cp.Count)
		}
		if err := n.cfg.Limits.CheckTopic(cp.Count, int16(raftfsm.TopicRF(t))); err != nil {
			return cmd, nil, err
		}
		if cp.Assignments == nil {
			placed, err := raftfsm.PlaceReplicas(img, cp.Count-have, int16(raftfsm.TopicRF(t)))
			if err != nil {
				return cmd, nil, err
			}
			cp.Assignments = placed
		}
		as = cp.Assignments
		cmd.CreatePartitions = &cp
		topic, id, count = cp.Topic, t.ID, int(cp.Count)
	default:
		return cmd, nil, nil
	}
	res, err := n.reserved.reserve(n.cfg.Limits, img, as, topic, id, count)
	return cmd, res, err
}

// clusterApplies refuses a command of a version above the cluster's
// (SetCommandVersion aside: it raises it).
func clusterApplies(img *raftfsm.Image, cmd raftfsm.Command) error {
	if cv := max(img.CommandVersion, 1); cmd.Version > cv && cmd.SetCommandVersion == nil {
		return fmt.Errorf("%w: a command of version %d, the cluster applies version %d until every node is upgraded",
			raftfsm.ErrInvalidCommand, cmd.Version, cv)
	}
	return nil
}

// prepareCurrent is prepare, tried again after a barrier when it refused
// the command from this node's image (a topic it does not know, or not
// fewer partitions than asked): a leader applies committed entries a
// moment after committing them (a newly elected one may not have applied
// its predecessor's last ones yet), and a deposed leader that has not
// noticed yet lacks its successor's. Such a refusal, answered as final,
// would contradict a change already acknowledged (the metadata
// linearizability check, issue 20). Once a barrier has committed, this
// node led at a point after the call began and has applied everything
// before it, so a refusal then is the state's. A failed barrier proposed
// nothing: ErrNotLeader, so Apply tries the current leader.
func (n *Node) prepareCurrent(ctx context.Context, cmd raftfsm.Command, timeout time.Duration) (raftfsm.Command, *reservation, error) {
	c, res, err := n.prepare(cmd)
	if err == nil || cmd.CreatePartitions == nil ||
		!(errors.Is(err, raftfsm.ErrUnknownTopic) || errors.Is(err, raftfsm.ErrInvalidPartitions)) {
		return c, res, err
	}
	if berr := n.barrier(ctx, timeout); berr != nil {
		return cmd, nil, berr
	}
	return n.prepare(cmd)
}

// barrier waits until a barrier entry proposed now has committed and
// everything before it is applied here, or ctx ends. Nothing is proposed
// that could apply: ErrNotLeader when leadership is lost or was not held.
func (n *Node) barrier(ctx context.Context, timeout time.Duration) error {
	f := n.raft.Barrier(timeout)
	waited := make(chan error, 1)
	if !n.spawn(func() { waited <- n.await(f) }) {
		return raftfsm.ErrClosed
	}
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		return fmt.Errorf("raftfsm: barrier: %w", ctx.Err())
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return raftfsm.ErrNotLeader
	}
	return raftError(err)
}

func newUUID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// raftError maps raft's errors to this package's.
func raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return raftfsm.ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before it reached the log (handOver): the successor
		// takes it.
		return raftfsm.ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		// The entry may still commit under the next leader: outcome unknown.
		return fmt.Errorf("%w (%v; the command may still apply)", raftfsm.ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return raftfsm.ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raftfsm: apply: %w (%v)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("raftfsm: apply: %w", err)
}

// moveWindow bounds the commands applyAll has proposed and this node has
// not applied yet. Proposing a whole plan at once (about 67 raft entries
// for a broker leading 1,333,333 partitions) put all of it ahead of
// anything proposed next: a successor of a controller closing meanwhile
// waited for every entry to reach it before raft handed over, then applied
// them all before its first write (0.4 to 5.6 s at 2,000,000 partitions,
// issue 19), and an admin write during the moves waited behind them too.
// With a window, what is still unproposed stays unproposed when
// leadership moves (the successor plans it again from its image), and a
// write waits behind at most this many entries. The state machine applies
// one entry at a time anyway: a few in flight keep it busy while the next
// ones commit.
const moveWindow = 8

// applyAll proposes cmds on this node (the leader), at most window of them
// not yet applied at a time, and returns each one's result and error once
// all are applied or ctx is done. Once one is refused because this node
// no longer leads (or closes), the rest are not proposed and fail the same
// way.
func (n *Node) applyAll(ctx context.Context, cmds []raftfsm.Command, window int) ([]any, []error) {
	res := make([]any, len(cmds))
	errs := make([]error, len(cmds))
	waited := make(chan struct{})
	if !n.spawn(func() {
		defer close(waited)
		n.proposeWindowed(ctx, cmds, max(window, 1), res, errs)
	}) {
		return make([]any, len(cmds)), fill(errs, raftfsm.ErrClosed)
	}
	select {
	case <-waited:
		return res, errs
	case <-ctx.Done():
		return make([]any, len(cmds)), fill(make([]error, len(cmds)), fmt.Errorf("raftfsm: apply (outcome unknown): %w", ctx.Err()))
	}
}

// proposeWindowed is applyAll's proposing and waiting, on a goroutine of
// the node's (await returns when it closes).
func (n *Node) proposeWindowed(ctx context.Context, cmds []raftfsm.Command, window int, res []any, errs []error) {
	futures := make([]raft.ApplyFuture, len(cmds))
	var reserved []*reservation
	defer func() {
		for _, res := range reserved {
			n.reserved.release(res)
		}
	}()
	var refused error // why the rest are not proposed
	collect := func(i int) {
		f := futures[i]
		if f == nil {
			return
		}
		if err := n.await(f); err != nil {
			errs[i] = raftError(err)
			if errors.Is(errs[i], raftfsm.ErrNotLeader) || errors.Is(errs[i], raftfsm.ErrClosed) {
				refused = cmp.Or(refused, errs[i])
			}
		} else if err, ok := f.Response().(error); ok {
			errs[i] = err
		} else {
			res[i] = f.Response()
		}
	}
	next := 0 // the oldest proposal not collected yet
	for i, cmd := range cmds {
		for ; i-next >= window; next++ {
			collect(next)
		}
		if refused != nil {
			errs[i] = refused
			continue
		}
		timeout, err := n.leaderTimeout(ctx)
		var res *reservation
		if err == nil {
			cmd, res, err = n.prepareCurrent(ctx, cmd, timeout)
		}
		reserved = append(reserved, res)
		var data []byte
		if err == nil {
			data, err = raftfsm.EncodeCommand(cmd)
		}
		if err != nil {
			errs[i] = err
			if errors.Is(err, raftfsm.ErrNotLeader) || errors.Is(err, raftfsm.ErrClosed) || ctx.Err() != nil {
				refused = err
			}
			continue
		}
		futures[i] = n.raft.Apply(data, timeout)
	}
	for ; next < len(cmds); next++ {
		collect(next)
	}
}

func fill(errs []error, err error) []error {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	return errs
}

// await waits for a raft future's outcome, or for the node to close.
//
// Why not f.Error() alone: hashicorp/raft's FSM goroutine returns on shutdown
// with committed batches still queued for it, and their futures are never
// answered. A waiter owned by Close's wait group would then hold Close (and
// every SIGTERM) forever. The helper goroutine returns once raft answers; in
// the rare case it never does, it ends with the process.
func (n *Node) await(f raft.Future) error {
	select {
	case err := <-futureError(f):
		return err
	case <-n.done:
		return raftfsm.ErrClosed
	}
}

// futureError delivers f's outcome on a channel, from a goroutine that
// returns once raft answers (see await for when it never does).
func futureError(f raft.Future) <-chan error {
	res := make(chan error, 1)
	go func() { res <- f.Error() }()
	return res
}
