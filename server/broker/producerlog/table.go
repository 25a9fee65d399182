package producerlog

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/producers"
)

// Table is a partition's producer table: kept by the partition's appends,
// the leader's (Get: producers.Table.Record, Marker) and a follower's
// copies of its leader's batches (Replay; Start for a log that holds
// none), rebuilt from the log when it is not loaded (Load, LoadLocked: a
// log opened with batches in it, or truncated or recovered since), and
// dropped (Reset) whenever the log changes other than by appends. The zero
// value is not loaded.
//
// The owning partition's append lock guards it: Load takes that lock
// itself, the other methods run with it held.
type Table struct{ kept[producers.Table] }

// Get is the table, nil when it is not loaded.
func (t *Table) Get() *producers.Table { return t.v }

// Reset drops the table; it is rebuilt from the log when needed.
func (t *Table) Reset() { t.reset() }

// Start loads an empty table for a log that holds no batch, unless one is
// loaded.
func (t *Table) Start(policy *producers.Policy) {
	t.start(func() *producers.Table { return producers.NewTable(policy) })
}

// Load rebuilds the table from log unless it is loaded: it reads the
// batches younger than the policy's expiration, the bulk of them without
// mu (kept.load).
func (t *Table) Load(mu sync.Locker, log Log, policy *producers.Policy, now time.Time) error {
	if t.loaded.Load() {
		return nil // the caller checks again under mu; no rule made (kept.go's rule says why)
	}
	return t.load(mu, log, tableRule(policy, now))
}

// LoadLocked is Load with the append lock held throughout.
func (t *Table) LoadLocked(log Log, policy *producers.Policy, now time.Time) error {
	if t.v != nil {
		return nil
	}
	return t.loadLocked(log, tableRule(policy, now))
}

// Replay records one batch appended to the log (Replay below); nothing
// when the table is not loaded.
func (t *Table) Replay(raw []byte, info recordbatch.Info, now time.Time) {
	if t.v != nil {
		Replay(t.v, raw, info, now)
	}
}

// LoadTable rebuilds a partition's producer table from its log, so
// duplicates are caught across restarts and leader changes. Producers idle
// longer than the policy's expiration are expired anyway, so the scan
// starts at the first batch younger than that.
func LoadTable(log Log, policy *producers.Policy, now time.Time) (*producers.Table, error) {
	var t Table
	if err := t.LoadLocked(log, policy, now); err != nil {
		return nil, err
	}
	return t.v, nil
}

func tableRule(policy *producers.Policy, now time.Time) rule[producers.Table] {
	return rule[producers.Table]{
		empty:  func() *producers.Table { return producers.NewTable(policy) },
		since:  now.Add(-policy.Expiration),
		replay: func(t *producers.Table, raw []byte, info recordbatch.Info) { Replay(t, raw, info, now) },
	}
}

// Replay records in t one batch of a partition's log (raw, its header
// info) as of now: an idempotent or transactional batch, or a
// transaction marker. LoadTable replays the log's batches in order; a
// follower replays each batch it copies from its leader as it appends it,
// so its table is the one LoadTable would make and the replica that leads
// next checks its producers without reading its log.
func Replay(t *producers.Table, raw []byte, info recordbatch.Info, now time.Time) {
	// The batch's own time, capped: a client's clock in the future must
	// not keep an id forever.
	at := min(info.MaxTimestamp, now.UnixMilli())
	switch {
	case isControl(info):
		if m, err := recordbatch.ParseControl(raw); err == nil {
			t.Marker(m, at, now)
		}
	case info.ProducerID >= 0 && !producers.IsKeyID(info.ProducerID):
		t.Record(producers.Batch{ProducerID: info.ProducerID, Epoch: info.ProducerEpoch, FirstSeq: info.BaseSequence,
			LastDelta: int32(info.LastOffset - info.BaseOffset), Records: raw[recordbatch.HeaderLen:]}, info.BaseOffset, at, now)
	}
}

// Active lists the producers a partition knows of: those of its table
// (held, a copy), with the transactions open in its log; a producer with
// an open transaction the table does not hold (not loaded yet) is listed
// with what the log knows. Sorted by id.
func Active(held []producers.Producer, open []segments.OngoingTxn) []kafkaproto.ActiveProducer {
	start := make(map[int64]segments.OngoingTxn, len(open))
	for _, t := range open {
		start[t.ProducerID] = t
	}
	out := []kafkaproto.ActiveProducer{}
	for _, e := range held {
		a := kafkaproto.ActiveProducer{ID: e.ID, Epoch: e.Epoch, LastSequence: e.LastSequence, LastTimestamp: e.LastTimestamp,
			CoordinatorEpoch: e.CoordinatorEpoch, TxnStartOffset: -1}
		if t, ok := start[e.ID]; ok {
			a.TxnStartOffset = t.FirstOffset
			delete(start, e.ID)
		}
		out = append(out, a)
	}
	for _, t := range start {
		out = append(out, kafkaproto.ActiveProducer{ID: t.ProducerID, Epoch: t.ProducerEpoch, LastSequence: -1,
			LastTimestamp: -1, CoordinatorEpoch: -1, TxnStartOffset: t.FirstOffset})
	}
	slices.SortFunc(out, func(a, b kafkaproto.ActiveProducer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
