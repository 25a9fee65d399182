package txn

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// State is a transactional id's state.
type State int8

// The states, in Kafka's order.
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
)

var stateNames = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"}

// String is Kafka's name of the state.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// preparing reports whether markers are being written.
func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// idle reports whether no transaction is open or ending.
func (s State) idle() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// TopicPartition names a partition.
type TopicPartition = kafkaproto.TopicPartition

// Meta is the coordinator's record of one transactional id.
type Meta struct {
	ProducerID int64
	Epoch      int16
	// LastProducerID and LastEpoch are what the producer held before the
	// last bump, so a retried InitProducerId (KIP-360) is recognized.
	LastProducerID int64
	LastEpoch      int16
	Timeout        time.Duration
	State          State
	Partitions     []TopicPartition // sorted, no duplicates
	StartMS        int64            // when the open transaction began; -1 none
	UpdateMS       int64
}

// has reports whether t is in the transaction.
func (m *Meta) has(t TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, t, cmpTP)
	return ok
}

// add puts t in the transaction's partitions.
func (m *Meta) add(t TopicPartition) {
	i, ok := slices.BinarySearchFunc(m.Partitions, t, cmpTP)
	if !ok {
		m.Partitions = slices.Insert(m.Partitions, i, t)
	}
}

func cmpTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// clone returns a copy that shares no slice with m.
func (m Meta) clone() Meta {
	m.Partitions = slices.Clone(m.Partitions)
	return m
}

// Records of __transaction_state (see the package doc).

const (
	keyVersion   = 0
	valueVersion = 1
)

var errBadRecord = errors.New("txn: malformed __transaction_state record")

type storedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type storedMeta struct {
	V          int               `json:"v"`
	PID        int64             `json:"pid"`
	Epoch      int16             `json:"epoch"`
	LastPID    int64             `json:"last_pid"`
	LastEpoch  int16             `json:"last_epoch"`
	TimeoutMS  int64             `json:"timeout_ms"`
	State      string            `json:"state"`
	Partitions []storedPartition `json:"partitions"`
	StartMS    int64             `json:"start_ms"`
	UpdateMS   int64             `json:"update_ms"`
}

// encodeKey is the record key of a transactional id.
func encodeKey(id string) []byte {
	b := binary.BigEndian.AppendUint16(nil, keyVersion)
	return append(b, id...)
}

func decodeKey(k []byte) (string, error) {
	if len(k) < 2 || binary.BigEndian.Uint16(k) != keyVersion {
		return "", fmt.Errorf("%w: key", errBadRecord)
	}
	return string(k[2:]), nil
}

func encodeValue(m Meta) []byte {
	sm := storedMeta{V: valueVersion, PID: m.ProducerID, Epoch: m.Epoch, LastPID: m.LastProducerID,
		LastEpoch: m.LastEpoch, TimeoutMS: m.Timeout.Milliseconds(), State: m.State.String(),
		Partitions: make([]storedPartition, len(m.Partitions)), StartMS: m.StartMS, UpdateMS: m.UpdateMS}
	for i, p := range m.Partitions {
		sm.Partitions[i] = storedPartition{Topic: p.Topic, Partition: p.Partition}
	}
	b, _ := json.Marshal(sm) // plain fields: cannot fail
	return b
}

func decodeValue(v []byte) (Meta, error) {
	var sm storedMeta
	if err := json.Unmarshal(v, &sm); err != nil {
		return Meta{}, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	st := slices.Index(stateNames, sm.State)
	if sm.V != valueVersion || st < 0 || sm.TimeoutMS < 0 {
		return Meta{}, fmt.Errorf("%w: version %d, state %q", errBadRecord, sm.V, sm.State)
	}
	m := Meta{ProducerID: sm.PID, Epoch: sm.Epoch, LastProducerID: sm.LastPID, LastEpoch: sm.LastEpoch,
		Timeout: time.Duration(sm.TimeoutMS) * time.Millisecond, State: State(st),
		StartMS: sm.StartMS, UpdateMS: sm.UpdateMS}
	for _, p := range sm.Partitions {
		m.add(TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return m, nil
}
