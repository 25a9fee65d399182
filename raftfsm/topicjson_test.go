package raftfsm

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The hand-written topic encoding is encoding/json's, byte for byte, for
// the edge cases (nil and empty lists, omitted reassignment lists, names
// and configs needing escapes, extreme ids) and for random topics.
func TestTopicJSONMatchesEncodingJSON(t *testing.T) {
	cases := []*Topic{
		{},
		{Name: "t", Partitions: []Partition{}},
		{ID: [16]byte{0, 255, 7}, Name: `a<b>&"c"\é`, Configs: map[string]string{"z": "1", "a": "<&>", "m": "\u2028"},
			Partitions: []Partition{
				{Leader: -1},
				{Leader: math.MaxInt32, LeaderEpoch: math.MinInt32, PartitionEpoch: 7, Replicas: []int32{}, ISR: []int32{}},
				{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Reassignment: &Reassignment{Adding: []int32{3}, Removing: []int32{2}}},
				{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, Reassignment: &Reassignment{Adding: []int32{}, Removing: nil}},
			}},
		{Name: "nil configs", Configs: nil, Partitions: nil},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := func() []int32 {
		if rng.IntN(5) == 0 {
			return nil
		}
		out := make([]int32, rng.IntN(4))
		for i := range out {
			out[i] = rng.Int32N(1<<20) - 5
		}
		return out
	}
	for range 200 {
		tp := &Topic{Name: string(rune(rng.IntN(0x2100))), Configs: map[string]string{"k": string(rune(rng.IntN(0x80)))}}
		for i := range tp.ID {
			tp.ID[i] = byte(rng.IntN(256))
		}
		for range rng.IntN(6) {
			tp.Partitions = append(tp.Partitions, Partition{Leader: rng.Int32N(9) - 1, LeaderEpoch: rng.Int32(), PartitionEpoch: -rng.Int32(),
				Replicas: ids(), ISR: ids(), Reassignment: &Reassignment{Adding: ids(), Removing: ids()}})
		}
		cases = append(cases, tp)
	}
	for i, tp := range cases {
		want, err := json.Marshal(topicFields(tp))
		if err != nil {
			t.Fatal(err)
		}
		if got := topicJSON(tp); !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
		if got, err := json.Marshal(tp); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("case %d: json.Marshal:\n got %s (%v)\nwant %s", i, got, err, want)
		}
	}
}

// topicFields is tp with its partitions as partitionFields, encoded by
// reflection: the JSON a topic had before the reassignment lists moved
// behind Partition.Reassignment.
func topicFields(tp *Topic) any {
	var parts []partitionFields
	if tp.Partitions != nil {
		parts = make([]partitionFields, 0, len(tp.Partitions))
	}
	for _, p := range tp.Partitions {
		parts = append(parts, partitionFields{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
			Replicas: p.Replicas, ISR: p.ISR, AddingReplicas: p.AddingReplicas(), RemovingReplicas: p.RemovingReplicas()})
	}
	return struct {
		ID         [16]byte
		Name       string
		Configs    map[string]string
		Partitions []partitionFields
	}{tp.ID, tp.Name, tp.Configs, parts}
}

// A partition's JSON is what the previous release wrote and read (stored
// topics of command version 1, snapshots carrying them, digests, the
// results of forwarded commands): both ways, with and without a
// reassignment running.
func TestPartitionJSONIsTheFieldsForm(t *testing.T) {
	for _, c := range []struct {
		json string // as the previous release's encoding/json wrote it
		p    Partition
	}{
		{`{"Leader":-1,"LeaderEpoch":0,"PartitionEpoch":0,"Replicas":null,"ISR":null}`, Partition{Leader: -1}},
		{`{"Leader":3,"LeaderEpoch":4,"PartitionEpoch":5,"Replicas":[3,1],"ISR":[]}`,
			Partition{Leader: 3, LeaderEpoch: 4, PartitionEpoch: 5, Replicas: []int32{3, 1}, ISR: []int32{}}},
		{`{"Leader":1,"LeaderEpoch":0,"PartitionEpoch":2,"Replicas":[2,3,4,1],"ISR":[1,2],"AddingReplicas":[4],"RemovingReplicas":[1]}`,
			Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{2, 3, 4, 1}, ISR: []int32{1, 2},
				Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}}},
		{`{"Leader":1,"LeaderEpoch":0,"PartitionEpoch":2,"Replicas":[2,1],"ISR":[1],"RemovingReplicas":[1]}`,
			Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{2, 1}, ISR: []int32{1}, Reassignment: &Reassignment{Removing: []int32{1}}}},
	} {
		got, err := json.Marshal(c.p)
		if err != nil || string(got) != c.json {
			t.Fatalf("encoded %s (%v), want %s", got, err, c.json)
		}
		var dec Partition
		if err := json.Unmarshal([]byte(c.json), &dec); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dec, c.p) {
			t.Fatalf("decoded %s as %+v (reassignment %+v), want %+v", c.json, dec, dec.Reassignment, c.p)
		}
	}
}
