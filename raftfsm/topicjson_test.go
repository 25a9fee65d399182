package raftfsm

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
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
				{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}},
				{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, AddingReplicas: []int32{}, RemovingReplicas: nil},
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
				Replicas: ids(), ISR: ids(), AddingReplicas: ids(), RemovingReplicas: ids()})
		}
		cases = append(cases, tp)
	}
	for i, tp := range cases {
		want, err := json.Marshal(tp)
		if err != nil {
			t.Fatal(err)
		}
		if got := topicJSON(tp); !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
