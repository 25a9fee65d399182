package quorum

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

func openLimited(t *testing.T, limits raftfsm.Limits) *Node {
	t.Helper()
	addr := testport.FreeAddr(t)
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: addr, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for id := int32(1); id <= 2; id++ {
		if _, err := n.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// The active controller bounds what it proposes before it allocates for it
// (placement of 2^31 partitions used to exhaust memory), on every path
// (Apply from any node and the controller RPC both end in applyLocal).
func TestApplyBoundsCountsBeforePlacement(t *testing.T) {
	n := openLimited(t, raftfsm.Limits{MaxPartitionsPerTopic: 100, MaxReplicationFactor: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd raftfsm.Command
		err error
	}{
		{raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: "t", Count: math.MaxInt32}}, raftfsm.ErrInvalidPartitions},
		{raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: "t", Count: 101}}, raftfsm.ErrInvalidPartitions},
		{raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "u", Partitions: math.MaxInt32, ReplicationFactor: 1}}, raftfsm.ErrInvalidPartitions},
		{raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "u", Partitions: 101, ReplicationFactor: 1}}, raftfsm.ErrInvalidPartitions},
		{raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "u", Partitions: 1, ReplicationFactor: 3}}, raftfsm.ErrInvalidReplicationFactor},
		{raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "../u", Partitions: 1, ReplicationFactor: 1}}, raftfsm.ErrInvalidTopicName},
	}
	for _, c := range cases {
		if _, err := n.Apply(ctx, c.cmd); !errors.Is(err, c.err) {
			t.Fatalf("%+v: err %v, want %v", c.cmd, err, c.err)
		}
	}
	if _, err := n.Apply(ctx, raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: "t", Count: 100}}); err != nil {
		t.Fatalf("growing to the limit: %v", err)
	}
}

// Concurrent creations cannot overshoot the cluster-wide limit: what is in
// flight counts.
func TestClusterPartitionLimitUnderConcurrency(t *testing.T) {
	n := openLimited(t, raftfsm.Limits{MaxPartitions: 23})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: fmt.Sprintf("c%d", i), Partitions: 3, ReplicationFactor: 1}})
		}()
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, raftfsm.ErrPolicyViolation):
			t.Fatalf("unexpected error %v", err)
		}
	}
	img, _ := n.Image()
	if total, _ := raftfsm.ImageLoad(img); created != 7 || total != 21 {
		t.Fatalf("%d topics, %d partitions created, want 7 and 21 (limit 23)", created, total)
	}
}

func TestBrokerPartitionLimit(t *testing.T) {
	n := openLimited(t, raftfsm.Limits{MaxBrokerPartitions: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "a", Partitions: 3, ReplicationFactor: 2}}); err != nil {
		t.Fatal(err)
	}
	_, err := n.Apply(ctx, raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: "a", Count: 4}})
	if !errors.Is(err, raftfsm.ErrPolicyViolation) {
		t.Fatalf("a fourth replica on a broker limited to 3: %v", err)
	}
}

// Every sentinel survives forwarding over the controller RPC, so a request
// sent to a follower gets the same error code (POLICY_VIOLATION, 409, ...)
// as one sent to the leader.
func TestRPCErrorCodesRoundTrip(t *testing.T) {
	for _, c := range errorCodes {
		if c.err == raftfsm.ErrNotLeader {
			continue // its own rules (codeMaybeApplied)
		}
		got := decodeError(encodeError(fmt.Errorf("wrapped: %w", c.err)))
		if !errors.Is(got, c.err) {
			t.Errorf("%s: decoded %v, want %v", c.code, got, c.err)
		}
	}
	for _, err := range []error{raftfsm.ErrPolicyViolation, raftfsm.ErrInvalidTopicName, raftfsm.ErrInvalidReplicationFactor, raftfsm.ErrQuorumChange} {
		if got := decodeError(encodeError(err)); !errors.Is(got, err) {
			t.Errorf("%v is not carried over the RPC: %v", err, got)
		}
	}
}

// An invalid command that reaches the raft log (proposed around prepare, as
// an older or hostile leader could) is committed but refused at apply: the
// node keeps running and the image does not change.
func TestInvalidCommandCommittedButRefused(t *testing.T) {
	n := openLimited(t, raftfsm.Limits{})
	before, _ := n.Image()
	for _, raw := range []string{
		`{"Version":1,"CreateTopic":{"Name":"../../victimdir","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`,
		`{"Version":1,"CreatePartitions":{"Topic":"x","Count":2147483647}}`,
		`not json`,
	} {
		f := n.raft.Apply([]byte(raw), 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if _, ok := f.Response().(error); !ok {
			t.Fatalf("%s: applied, result %v", raw, f.Response())
		}
	}
	after, _ := n.Image()
	if after.Digest() != before.Digest() || after.Topics.Len() != 0 {
		t.Fatalf("the image changed: %d topics", after.Topics.Len())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "fine", Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatalf("apply after refused entries: %v", err)
	}
}
