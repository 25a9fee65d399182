package raftfsm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// A command in the log that the API would refuse is refused at apply, as
// the API would (the log is input too): nothing changes, nothing panics,
// and the next valid command applies.
func TestFSMRefusesInvalidCommandsAtApply(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	setup(t, f) // indexes 1..4
	manyConfigs := map[string]string{}
	for i := range MaxTopicConfigs + 1 {
		manyConfigs[fmt.Sprintf("c%d", i)] = "v"
	}
	bad := []struct {
		name string
		cmd  Command
		err  error
	}{
		{"path traversal", create("../../victimdir", []int32{1}), ErrInvalidTopicName},
		{"dot", create(".", []int32{1}), ErrInvalidTopicName},
		{"dotdot", create("..", []int32{1}), ErrInvalidTopicName},
		{"slash", create("a/b", []int32{1}), ErrInvalidTopicName},
		{"absolute", create("/tmp/x", []int32{1}), ErrInvalidTopicName},
		{"nul", create("a\x00b", []int32{1}), ErrInvalidTopicName},
		{"too long", create(strings.Repeat("a", 250), []int32{1}), ErrInvalidTopicName},
		{"huge partition count", Command{CreateTopic: &CreateTopic{Name: "h", Partitions: math.MaxInt32, ReplicationFactor: 1, Assignments: [][]int32{{1}}}}, ErrInvalidPartitions},
		{"huge replication factor", Command{CreateTopic: &CreateTopic{Name: "h", Partitions: 1, ReplicationFactor: math.MaxInt16, Assignments: [][]int32{{1}}}}, ErrInvalidReplicationFactor},
		{"negative partitions", Command{CreateTopic: &CreateTopic{Name: "h", Partitions: -1, ReplicationFactor: 1}}, ErrInvalidPartitions},
		{"too many configs", Command{CreateTopic: &CreateTopic{Name: "h", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{1}}, Configs: manyConfigs}}, ErrInvalidCommand},
		{"huge config value", Command{AlterConfigs: &AlterConfigs{Topic: "t", Set: map[string]string{"k": strings.Repeat("v", 64<<10)}}}, ErrInvalidCommand},
		{"huge partition growth", Command{CreatePartitions: &CreatePartitions{Topic: "t", Count: math.MaxInt32, Assignments: [][]int32{{1, 2}}}}, ErrInvalidPartitions},
		{"negative broker id", Command{RegisterBroker: &RegisterBroker{ID: -5}}, ErrInvalidCommand},
		{"huge producer id block", Command{AllocateProducerIDs: &AllocateProducerIDs{Count: math.MaxInt64}}, ErrInvalidCommand},
	}
	before, _ := f.Image()
	digest := before.Digest()
	index := uint64(5)
	for _, tc := range bad {
		res := applyAt(t, f, index, tc.cmd)
		if err, ok := res.(error); !ok || !errors.Is(err, tc.err) {
			t.Fatalf("%s: result %v, want %v", tc.name, res, tc.err)
		}
		if img, _ := f.Image(); img.Digest() != digest || f.AppliedIndex() != 4 {
			t.Fatalf("%s: a refused command changed the state (applied index %d)", tc.name, f.AppliedIndex())
		}
		index++
	}
	if res := applyAt(t, f, index, create("fine", []int32{1})); isErr(res) {
		t.Fatalf("valid command after refused ones: %v", res)
	}
	// Undecodable bytes are refused the same way.
	if res := f.Apply(&raft.Log{Index: index + 1, Type: raft.LogCommand, Data: []byte(`{"Version":1,"CreateTopic":{"Name":"../x","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`)}); !isErr(res) {
		t.Fatalf("raw traversal command applied: %v", res)
	}
}
