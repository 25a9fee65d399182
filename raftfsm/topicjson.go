package raftfsm

import (
	"encoding/json"
	"strconv"
)

// topicJSON is json.Marshal(t), byte for byte, written by hand: the FSM
// stores a topic's whole state under one key after every change to it, so a
// controlled shutdown moving a third of a 10,000-partition topic's leaders
// encoded 10,000 partitions by reflection for every command. The partitions
// are plain integers and integer lists, appended here; the name and the
// configs (strings that need escaping) still go through encoding/json.
// TestTopicJSONMatchesEncodingJSON keeps the two equal.
func topicJSON(t *Topic) []byte {
	name := mustJSON(t.Name)
	configs := mustJSON(t.Configs)
	b := make([]byte, 0, 64+len(name)+len(configs)+len(t.Partitions)*96)
	b = append(b, `{"ID":[`...)
	for i, v := range t.ID {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	b = append(b, `],"Name":`...)
	b = append(b, name...)
	b = append(b, `,"Configs":`...)
	b = append(b, configs...)
	b = append(b, `,"Partitions":`...)
	if t.Partitions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range t.Partitions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPartitionJSON(b, &t.Partitions[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendPartitionJSON(b []byte, p *Partition) []byte {
	b = append(b, `{"Leader":`...)
	b = strconv.AppendInt(b, int64(p.Leader), 10)
	b = append(b, `,"LeaderEpoch":`...)
	b = strconv.AppendInt(b, int64(p.LeaderEpoch), 10)
	b = append(b, `,"PartitionEpoch":`...)
	b = strconv.AppendInt(b, int64(p.PartitionEpoch), 10)
	b = append(b, `,"Replicas":`...)
	b = appendIDsJSON(b, p.Replicas)
	b = append(b, `,"ISR":`...)
	b = appendIDsJSON(b, p.ISR)
	if adding := p.AddingReplicas(); len(adding) > 0 { // omitempty
		b = append(b, `,"AddingReplicas":`...)
		b = appendIDsJSON(b, adding)
	}
	if removing := p.RemovingReplicas(); len(removing) > 0 {
		b = append(b, `,"RemovingReplicas":`...)
		b = appendIDsJSON(b, removing)
	}
	return append(b, '}')
}

// appendIDsJSON appends ids as encoding/json does: null for a nil slice.
func appendIDsJSON(b []byte, ids []int32) []byte {
	if ids == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}

// partitionFields is a Partition's JSON form: the fields a partition had
// before its reassignment lists moved behind Partition.Reassignment, so
// that stored topics, image digests and RPC results stay what they were
// (TestPartitionJSONIsTheFieldsForm).
type partitionFields struct {
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
	Replicas         []int32
	ISR              []int32
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
}

// MarshalJSON writes p as partitionFields, by hand (appendPartitionJSON).
func (p Partition) MarshalJSON() ([]byte, error) {
	return appendPartitionJSON(nil, &p), nil
}

// UnmarshalJSON reads p from partitionFields.
func (p *Partition) UnmarshalJSON(b []byte) error {
	var f partitionFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*p = Partition{Leader: f.Leader, LeaderEpoch: f.LeaderEpoch, PartitionEpoch: f.PartitionEpoch,
		Replicas: f.Replicas, ISR: f.ISR, Reassignment: newReassignment(f.AddingReplicas, f.RemovingReplicas)}
	return nil
}
