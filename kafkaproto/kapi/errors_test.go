package kapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error messages sent to Kafka clients name no internal Go package.
func TestErrMessageNamesNoPackage(t *testing.T) {
	err := fmt.Errorf("create topic orders: %w", errors.New("raftfsm: topic already exists: orders"))
	if got := *ErrMessage(err); got != "create topic orders: topic already exists: orders" {
		t.Fatalf("ErrMessage = %q", got)
	}
}

// packagePrefixRegexp is what ErrMessage removed before issue 19 (a regexp
// per call): stripPackagePrefixes must give the same text.
var packagePrefixRegexp = regexp.MustCompile(`\b(api|raftfsm|segments|recordbatch|kafkaproto|server|web): `)

var errMessageCases = []string{
	"",
	"disk on fire",
	"kafkaproto: request timed out",
	"server: kafkaproto: not leader or follower",
	"create topic orders: raftfsm: topic already exists: orders",
	"wait for the in-sync replicas of orders-17: context deadline exceeded",
	"server: wait for orders-17: kafkaproto: request timed out: segments: read x",
	"webapi: x", "myserver: x", "_api: x", "9web: x", "api:x", "api : x", "api:  x",
	"(api: x)", "x api: api: y", "kafkaproto: ", "server: server: ", "api: web: ",
	"a: b: c: ", ": : ", "recordbatch:: x", "é api: x", "éapi: x", "api: éweb: x",
	"runnel/server: x", "server-1: x", "api: kafkaproto:x",
}

func TestErrMessageAsTheRegexpDid(t *testing.T) {
	for _, in := range errMessageCases {
		want := packagePrefixRegexp.ReplaceAllString(in, "")
		if got := *ErrMessage(errors.New(in)); got != want {
			t.Errorf("ErrMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzErrMessage(f *testing.F) {
	for _, in := range errMessageCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want := packagePrefixRegexp.ReplaceAllString(in, "")
		if got := stripPackagePrefixes(in); got != want {
			t.Errorf("stripPackagePrefixes(%q) = %q, want %q", in, got, want)
		}
	})
}

// A sentinel's message is made once: answering 100,000 partitions with it
// allocates nothing (issue 19).
func TestErrMessageOfASentinelAllocatesNothing(t *testing.T) {
	for _, table := range [][]errorCode{errorTable, groupErrorTable} {
		for _, e := range table {
			want := packagePrefixRegexp.ReplaceAllString(e.err.Error(), "")
			if got := *ErrMessage(e.err); got != want {
				t.Errorf("ErrMessage(%v) = %q, want %q", e.err, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { ErrMessage(ErrRequestTimedOut) }); n != 0 {
		t.Errorf("ErrMessage(ErrRequestTimedOut): %v allocations", n)
	}
	if first, again := ErrMessage(ErrNotLeader), ErrMessage(ErrNotLeader); first != again {
		t.Error("a sentinel's message is made at every call")
	}
}

func TestErrorTable(t *testing.T) {
	for _, e := range errorTable {
		wrapped := fmt.Errorf("server: partition 3: %w", e.err)
		if got := KafkaErr(wrapped); got != e.code.Code {
			t.Errorf("%v: code %d, want %d", e.err, got, e.code.Code)
		}
	}
	if got := KafkaErr(errors.New("disk on fire")); got != kerr.UnknownServerError.Code {
		t.Errorf("unmatched error: code %d", got)
	}
	if KafkaErr(nil) != 0 {
		t.Error("nil error has a code")
	}
}

func TestGroupErrCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("x: %w", ErrRebalanceInProgress), kerr.RebalanceInProgress},
		{ErrNotCoordinator, kerr.NotCoordinator},
		{ErrMemberIDRequired, kerr.MemberIDRequired},
		{fmt.Errorf("wrapped: %w", ErrUnknownTopicOrPartition), kerr.UnknownTopicOrPartition},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
	} {
		if got := GroupErr(tc.err); got != tc.want.Code {
			t.Errorf("GroupErr(%v) = %d, want %d", tc.err, got, tc.want.Code)
		}
	}
}
