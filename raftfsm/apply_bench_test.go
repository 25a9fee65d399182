package raftfsm

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyCreate applies one topic creation (one command, one batch)
// to a state machine already holding 100 and then 100,000 topics. An apply
// whose cost follows the change and not the image reports the same time for
// both; "ratio" on the larger case is its ns/op over the smaller case's, in
// the same run.
func BenchmarkApplyCreate(b *testing.B) {
	var small float64
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			f, next := benchFSM(b, n)
			applyCreates(b, f, next, n == 100, &small)
		})
	}
}

// benchFSM returns a state machine holding one broker and n one-partition
// topics, applied in batches of 1,000, and the next raft index.
func benchFSM(b *testing.B, n int) (*FSM, uint64) {
	b.Helper()
	db, err := OpenBadger(b.TempDir(), false, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	f, err := NewFSM(db, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	f.ApplyBatch([]*raft.Log{commandLog(b, index, reg(1, ""))})
	index++
	for made := 0; made < n; {
		var batch []*raft.Log
		for ; made < n && len(batch) < 1000; made++ {
			batch = append(batch, commandLog(b, index, create(fmt.Sprintf("topic-%07d", made), []int32{1})))
			index++
		}
		for _, res := range f.ApplyBatch(batch) {
			if isErr(res) {
				b.Fatal(res)
			}
		}
	}
	return f, index
}

func commandLog(b *testing.B, index uint64, cmd Command) *raft.Log {
	// Version 0: EncodeCommand writes the lowest version that expresses cmd.
	data, err := EncodeCommand(cmd)
	if err != nil {
		b.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// BenchmarkApplyCreateWithACLs applies one topic creation to a state
// machine holding 10 and then 10,000 ACLs: a batch that changes no ACL
// should not pay for the ACLs it leaves alone. "ratio" on the larger case
// is its ns/op over the smaller case's, in the same run.
func BenchmarkApplyCreateWithACLs(b *testing.B) {
	var small float64
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			f, next := benchFSM(b, 100)
			for made := 0; made < n; {
				var acls []ACLEntry
				for ; made < n && len(acls) < MaxACLsPerCommand; made++ {
					acls = append(acls, ACLEntry{ResourceType: "topic", ResourceName: fmt.Sprintf("t-%d", made), PatternType: "literal",
						Principal: "User:alice", Host: "*", Operation: "read", Permission: "allow"})
				}
				if res := f.ApplyBatch([]*raft.Log{commandLog(b, next, Command{CreateACLs: &CreateACLs{ACLs: acls}})})[0]; isErr(res) {
					b.Fatal(res)
				}
				next++
			}
			applyCreates(b, f, next, n == 10, &small)
		})
	}
}

// applyCreates times one topic creation per iteration on f, from raft
// index next. The baseline case stores its ns/op in *small; another case
// reports its ns/op over that as "ratio".
func applyCreates(b *testing.B, f *FSM, next uint64, baseline bool, small *float64) {
	b.Helper()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		l := commandLog(b, next, create(fmt.Sprintf("new-%d", i), []int32{1}))
		if res := f.ApplyBatch([]*raft.Log{l})[0]; isErr(res) {
			b.Fatal(res)
		}
		next++
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	if baseline {
		*small = perOp
	} else if *small > 0 {
		b.ReportMetric(perOp/(*small), "ratio")
	}
}
