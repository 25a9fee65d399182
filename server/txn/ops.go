package txn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// TxnProducer names a transactional producer as a request gives it.
type TxnProducer = kafkaproto.TxnProducer

// InitProducerID gives the producer of transactional id its producer id
// and a new epoch, fencing older holders of the id. pid and epoch are the
// producer's current ones (KIP-360) or -1. An open transaction of the id
// is aborted first: the answer is then CONCURRENT_TRANSACTIONS, and the
// retry gets the id.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return -1, -1, fmt.Errorf("%w: %v is not in (0, %v] (transaction.max.timeout.ms)", kafkaproto.ErrInvalidTransactionTimeout, timeout, c.cfg.MaxTimeout)
	}
	e, err := c.lookup(id, true)
	if err != nil {
		return -1, -1, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return -1, -1, fmt.Errorf("%w: %s is being forgotten", kafkaproto.ErrConcurrentTransactions, id)
	}
	m := e.meta
	if m.ProducerID < 0 {
		newID, err := c.cfg.Cluster.AllocateProducerID(ctx)
		if err != nil {
			return -1, -1, err
		}
		nm := Meta{ProducerID: newID, Epoch: 0, LastProducerID: -1, LastEpoch: -1, Timeout: timeout, State: Empty, StartMS: -1}
		if err := c.storeLocked(ctx, e, nm); err != nil {
			return -1, -1, err
		}
		return newID, 0, nil
	}
	if pid >= 0 {
		switch {
		case pid == m.ProducerID && epoch == m.Epoch:
		case pid == m.LastProducerID && epoch == m.LastEpoch && m.State.idle():
			// A retry of the bump that made the current epoch (or a
			// producer whose transaction timed out and was fenced).
			return m.ProducerID, m.Epoch, nil
		default:
			return -1, -1, fmt.Errorf("%w: %s is held by producer %d epoch %d, not %d epoch %d", kafkaproto.ErrProducerFenced, id, m.ProducerID, m.Epoch, pid, epoch)
		}
	}
	switch {
	case m.State.preparing():
		return -1, -1, fmt.Errorf("%w: %s is ending a transaction", kafkaproto.ErrConcurrentTransactions, id)
	case m.State == Ongoing:
		if err := c.abortLocked(ctx, e); err != nil {
			return -1, -1, err
		}
		return -1, -1, fmt.Errorf("%w: %s had an open transaction, being aborted", kafkaproto.ErrConcurrentTransactions, id)
	}
	nm := m.clone()
	nm.LastProducerID, nm.LastEpoch = m.ProducerID, m.Epoch
	if m.Epoch >= math.MaxInt16-1 {
		if nm.ProducerID, err = c.cfg.Cluster.AllocateProducerID(ctx); err != nil {
			return -1, -1, err
		}
		nm.Epoch = 0
	} else {
		nm.Epoch++
	}
	nm.Timeout, nm.State, nm.Partitions, nm.StartMS = timeout, Empty, nil, -1
	if err := c.storeLocked(ctx, e, nm); err != nil {
		return -1, -1, err
	}
	return nm.ProducerID, nm.Epoch, nil
}

// abortLocked fences the producer (epoch bump) and aborts its open
// transaction: PrepareAbort is stored, markers are written in the
// background.
func (c *Coordinator) abortLocked(ctx context.Context, e *entry) error {
	nm := e.meta.clone()
	if nm.Epoch < math.MaxInt16-1 {
		nm.LastProducerID, nm.LastEpoch = nm.ProducerID, nm.Epoch
		nm.Epoch++
	}
	nm.State = PrepareAbort
	if err := c.storeLocked(ctx, e, nm); err != nil {
		return err
	}
	c.startCompleteLocked(e)
	return nil
}

// producerEntry finds the entry of a producer's id, locked, and checks the
// producer holds it. The caller unlocks e.mu.
func (c *Coordinator) producerEntry(p TxnProducer) (*entry, error) {
	e, err := c.lookup(p.TxnID, false)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: no producer holds %s", kafkaproto.ErrInvalidProducerIDMapping, p.TxnID)
		}
		return nil, err
	}
	e.mu.Lock()
	m := &e.meta
	switch {
	case e.removed || m.ProducerID < 0 || m.ProducerID != p.ID:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is not held by producer %d", kafkaproto.ErrInvalidProducerIDMapping, p.TxnID, p.ID)
	case m.Epoch != p.Epoch:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is at epoch %d, not %d", kafkaproto.ErrProducerFenced, p.TxnID, m.Epoch, p.Epoch)
	}
	return e, nil
}

// AddPartitions adds partitions to the producer's transaction, opening it
// when none is. The result holds one error per partition: when one does
// not exist, none is added (the others: OPERATION_NOT_ATTEMPTED).
func (c *Coordinator) AddPartitions(ctx context.Context, p TxnProducer, parts []TopicPartition) ([]error, error) {
	errs := make([]error, len(parts))
	missing := false
	for i, t := range parts {
		if !c.cfg.Cluster.PartitionExists(t) {
			errs[i] = fmt.Errorf("%w: %s-%d", kafkaproto.ErrUnknownTopicOrPartition, t.Topic, t.Partition)
			missing = true
		}
	}
	if missing {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = kafkaproto.ErrOperationNotAttempted
			}
		}
		return errs, nil
	}
	e, err := c.producerEntry(p)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	m := e.meta
	if m.State.preparing() {
		return nil, fmt.Errorf("%w: %s is ending a transaction", kafkaproto.ErrConcurrentTransactions, p.TxnID)
	}
	if m.State == Ongoing && !slices.ContainsFunc(parts, func(t TopicPartition) bool { return !m.has(t) }) {
		return errs, nil
	}
	nm := m.clone()
	if nm.State != Ongoing {
		nm.State, nm.Partitions, nm.StartMS = Ongoing, nil, c.now().UnixMilli()
	}
	for _, t := range parts {
		nm.add(t)
	}
	if err := c.storeLocked(ctx, e, nm); err != nil {
		return nil, err
	}
	return errs, nil
}

// AddOffsets adds the __consumer_offsets partition of group to the
// producer's transaction.
func (c *Coordinator) AddOffsets(ctx context.Context, p TxnProducer, group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", kafkaproto.ErrInvalidGroupID)
	}
	t, err := c.cfg.Cluster.GroupPartition(ctx, group)
	if err != nil {
		return err
	}
	errs, err := c.AddPartitions(ctx, p, []TopicPartition{t})
	if err != nil {
		return err
	}
	return errs[0]
}

// EndTxn commits or aborts the producer's transaction. It returns once
// PrepareCommit/PrepareAbort is stored and the markers are written, or
// after endWait with the markers still being retried (the outcome is
// decided). A retry of an end that completed succeeds.
func (c *Coordinator) EndTxn(ctx context.Context, p TxnProducer, commit bool) error {
	e, err := c.producerEntry(p)
	if err != nil {
		return err
	}
	m := e.meta
	want, done := PrepareAbort, CompleteAbort
	if commit {
		want, done = PrepareCommit, CompleteCommit
	}
	switch m.State {
	case Ongoing:
	case want:
		e.mu.Unlock()
		return fmt.Errorf("%w: %s is already ending its transaction", kafkaproto.ErrConcurrentTransactions, p.TxnID)
	case done:
		e.mu.Unlock()
		return nil // a retry
	default:
		e.mu.Unlock()
		return fmt.Errorf("%w: cannot %s %s in state %s", kafkaproto.ErrInvalidTxnState, map[bool]string{true: "commit", false: "abort"}[commit], p.TxnID, m.State)
	}
	nm := m.clone()
	nm.State = want
	if err := c.storeLocked(ctx, e, nm); err != nil {
		e.mu.Unlock()
		return err
	}
	wait := c.startCompleteLocked(e)
	e.mu.Unlock()
	t := time.NewTimer(endWait)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
	case <-ctx.Done():
	case <-e.sh.ctx.Done():
	}
	return nil
}

// startCompleteLocked starts writing the markers of e's Prepare* state in
// the background, then storing its Complete* state. It returns a channel
// closed when that is done.
func (c *Coordinator) startCompleteLocked(e *entry) <-chan struct{} {
	done := make(chan struct{})
	e.completing = done
	m := e.meta.clone()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if c.complete(e, m) {
			close(done)
		}
	}()
	return done
}

// complete writes the markers of m (a Prepare* state of e) until every
// partition has its marker, then stores the Complete* state. It reports
// whether it finished (false: the shard was unloaded; its next leader
// completes the transaction).
func (c *Coordinator) complete(e *entry, m Meta) bool {
	ctx := e.sh.ctx
	mk := Marker{ProducerID: m.ProducerID, Epoch: m.Epoch, Commit: m.State == PrepareCommit, CoordinatorEpoch: e.sh.epoch}
	pending := m.Partitions
	for attempt := 0; len(pending) > 0; attempt++ {
		errs := c.cfg.Markers.WriteMarkers(ctx, mk, pending)
		var left []TopicPartition
		for i, err := range errs {
			if err != nil {
				left = append(left, pending[i])
				if attempt%25 == 0 && !isCtxErr(err) {
					c.logger.Warn("write transaction marker", "id", e.id, "topic", pending[i].Topic,
						"partition", pending[i].Partition, "commit", mk.Commit, "err", err)
				}
			}
		}
		pending = left
		if len(pending) == 0 {
			break
		}
		if !sleepCtx(ctx, markerRetry) {
			return false
		}
	}
	for {
		e.mu.Lock()
		cur := e.meta
		if cur.State != m.State || cur.ProducerID != m.ProducerID || cur.Epoch != m.Epoch || e.removed {
			e.mu.Unlock()
			return true // changed under us (cannot happen while preparing): nothing left to do
		}
		nm := cur.clone()
		nm.State, nm.Partitions = CompleteAbort, nil
		if m.State == PrepareCommit {
			nm.State = CompleteCommit
		}
		sctx, cancel := context.WithTimeout(ctx, endWait)
		err := c.storeLocked(sctx, e, nm)
		cancel()
		e.mu.Unlock()
		if err == nil {
			return true
		}
		c.logger.Warn("store completed transaction", "id", e.id, "err", err)
		if !sleepCtx(ctx, markerRetry) {
			return false
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Tick aborts the transactions open longer than their timeout (fencing
// their producer with a bumped epoch) and forgets the ids idle longer
// than Config.IDExpiration. Start calls it every second.
func (c *Coordinator) Tick() {
	now := c.now()
	var gone []*entry
	defer func() {
		for _, e := range gone {
			c.forget(e) // after e.mu: Coordinator.mu comes first
		}
	}()
	for _, e := range c.entries() {
		e.mu.Lock()
		m := e.meta
		ctx, cancel := context.WithTimeout(e.sh.ctx, endWait)
		switch {
		case e.removed:
		case m.ProducerID < 0:
			// Created by an InitProducerId whose store failed.
			e.removed = true
			gone = append(gone, e)
		case m.State == Ongoing && now.Sub(time.UnixMilli(m.StartMS)) > m.Timeout:
			c.logger.Info("aborting timed-out transaction", "id", e.id, "producer_id", m.ProducerID, "timeout", m.Timeout)
			if err := c.abortLocked(ctx, e); err != nil {
				c.logger.Warn("abort timed-out transaction", "id", e.id, "err", err)
			}
		case m.State.idle() && now.Sub(time.UnixMilli(m.UpdateMS)) > c.cfg.IDExpiration:
			if err := c.cfg.Log.Append(ctx, e.sh.p, encodeKey(e.id), nil); err != nil {
				c.logger.Warn("expire transactional id", "id", e.id, "err", err)
				break
			}
			e.removed = true
			gone = append(gone, e)
		}
		cancel()
		e.mu.Unlock()
	}
}

// Describe describes ids, one answer per id.
func (c *Coordinator) Describe(ids []string) []kafkaproto.TxnDescription {
	out := make([]kafkaproto.TxnDescription, len(ids))
	for i, id := range ids {
		out[i] = kafkaproto.TxnDescription{TxnID: id}
		e, err := c.lookup(id, false)
		if err != nil {
			out[i].Err = err
			continue
		}
		e.mu.Lock()
		m := e.meta.clone()
		removed := e.removed
		e.mu.Unlock()
		if removed || m.ProducerID < 0 {
			out[i].Err = fmt.Errorf("%w: %s", kafkaproto.ErrTransactionalIDNotFound, id)
			continue
		}
		out[i] = describe(id, m)
	}
	return out
}

func describe(id string, m Meta) kafkaproto.TxnDescription {
	start := m.StartMS
	if m.State == Empty {
		start = -1
	}
	return kafkaproto.TxnDescription{TxnID: id, State: m.State.String(), Timeout: m.Timeout, StartMS: start,
		ProducerID: m.ProducerID, Epoch: m.Epoch, Partitions: m.Partitions}
}

// List describes every id this broker coordinates that passes f, sorted
// by id.
func (c *Coordinator) List(f kafkaproto.TxnFilter) []kafkaproto.TxnDescription {
	now := c.now().UnixMilli()
	var out []kafkaproto.TxnDescription
	for _, e := range c.entries() {
		e.mu.Lock()
		m := e.meta.clone()
		removed := e.removed
		e.mu.Unlock()
		switch {
		case removed || m.ProducerID < 0:
		case len(f.States) > 0 && !slices.Contains(f.States, m.State.String()):
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
		case f.MinDuration > 0 && (m.State != Ongoing || now-m.StartMS < f.MinDuration.Milliseconds()):
		default:
			out = append(out, describe(e.id, m))
		}
	}
	return out
}
