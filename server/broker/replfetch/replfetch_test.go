package replfetch

import (
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Collect hands over what changed since the last Collect, once: added,
// touched and removed (zero state) partitions; a partition not followed
// is not marked by Touch; all hands over every partition followed.
func TestChangesCollectsOnlyWhatChanged(t *testing.T) {
	var c Changes[int, *string]
	st := func(s string) *string { return &s }
	for i := range 100 {
		c.Add(i, st(fmt.Sprint(i)))
	}
	work := map[int]*string{}
	if n := c.Collect(work, false); n != 100 {
		t.Fatalf("first collect hands over %d, want the 100 added", n)
	}
	clear(work)
	if n := c.Collect(work, false); n != 0 {
		t.Fatalf("collect with nothing changed hands over %d, want 0", n)
	}
	if !c.Touch(3) || c.Touch(500) || !c.Remove(4) || c.Remove(4) {
		t.Fatal("Touch or Remove misreports whether the partition is followed")
	}
	c.Add(5, st("new"))
	if n := c.Collect(work, false); n != 3 || *work[3] != "3" || work[4] != nil || *work[5] != "new" {
		t.Fatalf("collect hands over %d: %v, want 3 (touched), 4 (removed: nil), 5 (its new state)", n, work)
	}
	if n := c.Collect(work, true); n != 99 || c.Len() != 99 || len(c.Keys()) != 99 {
		t.Fatalf("collect of all hands over %d of %d followed, want 99", n, c.Len())
	}
}

func positions(req *kmsg.FetchRequest) map[int32]int64 {
	out := map[int32]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.FetchOffset
		}
	}
	return out
}

// A session opens with a full request, moves its epoch with each answer,
// forgets only what it held, and starts over when the leader lost it or
// keeps none.
func TestSessionEpochsAndForgets(t *testing.T) {
	var s Session[int32, string]
	tp := func(i int32) TopicPartition { return TopicPartition{"t", i} }
	answer := func(req *kmsg.FetchRequest, id int32, code int16) error {
		resp := kmsg.NewPtrFetchResponse()
		resp.SessionID, resp.ErrorCode = id, code
		return s.Answered(req, resp)
	}
	r := s.NewRequest(1, 0, 1<<20)
	r.List(1, tp(1), Pos{1, 10, 0}, 100, "a")
	r.List(2, tp(2), Pos{1, 20, 0}, 100, "b")
	r.Forget(3) // not held: nothing to forget
	if r.Req.SessionEpoch != 0 || len(positions(r.Req)) != 2 || len(r.Req.ForgottenTopics) != 0 {
		t.Fatalf("opening request: epoch %d, lists %v, forgets %v", r.Req.SessionEpoch, positions(r.Req), r.Req.ForgottenTopics)
	}
	if err := answer(r.Req, 9, 0); err != nil || s.Epoch() != 1 || s.Full() {
		t.Fatalf("after the grant: %v, epoch %d", err, s.Epoch())
	}
	if k, pos, v, ok := s.Lookup("t", 2); !ok || k != 2 || pos.Offset != 20 || v != "b" {
		t.Fatalf("lookup t-2: %v %v %v %v", k, pos, v, ok)
	}
	r = s.NewRequest(1, 0, 1<<20)
	r.Forget(1)
	if r.Req.SessionID != 9 || r.Req.SessionEpoch != 1 || fmt.Sprint(r.Req.ForgottenTopics[0].Partitions) != "[1]" || s.Len() != 1 {
		t.Fatalf("incremental request: session %d epoch %d forgets %v, holds %d", r.Req.SessionID, r.Req.SessionEpoch, r.Req.ForgottenTopics, s.Len())
	}
	r.Req.SessionEpoch = math.MaxInt32
	if err := answer(r.Req, 9, 0); err != nil || s.Epoch() != 1 {
		t.Fatalf("after epoch MaxInt32: %v, epoch %d, want 1", err, s.Epoch())
	}
	r = s.NewRequest(1, 0, 1<<20)
	if err := answer(r.Req, 0, kerr.InvalidFetchSessionEpoch.Code); err == nil || !s.Full() || s.Len() != 0 {
		t.Fatalf("a lost session: %v, full %v, holds %d; want ErrSessionLost, a new session, nothing held", err, s.Full(), s.Len())
	}
	r = s.NewRequest(1, 0, 1<<20)
	if err := answer(r.Req, 0, 0); err != nil || s.Epoch() != -1 || !r.Room("t") {
		t.Fatalf("a leader keeping no session: %v, epoch %d", err, s.Epoch())
	}
}

// A request fills up to what the leader reads (a request but Produce up
// to 1 MiB), whatever its topics' names, and lists many more partitions
// of topics of 1,000 than the 8,000 a count allowed (issue 19).
func TestRequestFitsTheLeadersLimit(t *testing.T) {
	for _, c := range []struct {
		name     string
		perTopic int
	}{{"t", 1000}, {fmt.Sprintf("%0249d", 0), 1}, {"scale-00000", 1000}} {
		var s Session[int, struct{}]
		r := s.NewRequest(1, 0, 1<<20)
		for i := 0; ; i++ {
			topic := fmt.Sprintf("%s-%d", c.name, i/c.perTopic)
			if c.perTopic == 1 { // a topic each, its name 249 bytes long
				topic = fmt.Sprintf("%s%d", c.name[:len(c.name)-len(fmt.Sprint(i))], i)
			}
			if !r.Room(topic) {
				break
			}
			r.List(i, TopicPartition{topic, int32(i % c.perTopic)}, Pos{1, 1 << 40, 1 << 40}, 1<<20, struct{}{})
		}
		size := len(r.Req.AppendTo(nil))
		if size > 1<<20-64 || size < MaxRequestBytes*9/10 {
			t.Errorf("%q, %d a topic: a full request of %d partitions is %d bytes, want at most 1 MiB and near %d", c.name[:min(8, len(c.name))], c.perTopic, r.Listed, size, MaxRequestBytes)
		}
		if c.perTopic == 1000 && r.Listed < 16000 {
			t.Errorf("%q: %d partitions a request, want twice the 8,000 a count allowed", c.name, r.Listed)
		}
	}
}

// A request that cannot list every moved partition forgets the others
// the leader's session holds (fetchsession.go says why), but only while
// the request stays within what the leader reads: after a kill -9 at
// 300,000 partitions a leader's session holds 100,000 or more of them,
// 4 bytes each forgotten, beside 640 KiB listed.
func TestForgetsKeepTheRequestWithinTheLeadersLimit(t *testing.T) {
	const n = 300_000
	var s Session[int, struct{}]
	r := s.NewRequest(1, 0, 1<<20)
	tp := func(i int) TopicPartition { return TopicPartition{fmt.Sprintf("scale-%05d", i/1000), int32(i % 1000)} }
	for i := range n {
		r.List(i, tp(i), Pos{1, 0, 0}, 1<<20, struct{}{})
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = 7
	if err := s.Answered(r.Req, resp); err != nil || s.Len() != n {
		t.Fatalf("grant: %v, holds %d", err, s.Len())
	}
	r = s.NewRequest(1, 0, 1<<20)
	forgot := 0
	for i := range n { // every position moved, as fetchRequest builds it
		if r.Room(tp(i).Topic) {
			r.List(i, tp(i), Pos{1, 1, 0}, 1<<20, struct{}{})
		} else if r.ForgetIfRoom(i) {
			forgot++
		}
	}
	if size := len(r.Req.AppendTo(nil)); size > 1<<20-64 {
		t.Fatalf("%d listed and %d forgotten: %d bytes, more than the leader reads", r.Listed, forgot, size)
	}
	if forgot < 50_000 {
		t.Fatalf("%d forgotten, want the request filled with forgets", forgot)
	}
}

// A request is built in the memory of the one before (issue 19): it
// lists and forgets only its own partitions, in its own topics, however
// many the one before held, and once the session's requests were as
// large before, building one allocates nothing.
func TestRequestReusesTheOneBefore(t *testing.T) {
	var s Session[int, struct{}]
	names := []string{"t0", "t1", "t2"}
	tp := func(i int) TopicPartition { return TopicPartition{names[i%3], int32(i)} }
	r := s.NewRequest(1, 0, 1<<20)
	for i := range 300 {
		r.List(i, tp(i), Pos{1, 5, 0}, 1<<20, struct{}{})
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = 3
	if err := s.Answered(r.Req, resp); err != nil {
		t.Fatal(err)
	}
	build := func(list, forget []int) *kmsg.FetchRequest {
		r := s.NewRequest(1, 0, 1<<20)
		for _, i := range list {
			r.List(i, tp(i), Pos{1, 6, 0}, 1<<20, struct{}{})
		}
		for _, i := range forget {
			r.Forget(i)
		}
		return r.Req
	}
	req := build([]int{3, 4, 5}, []int{9, 10})
	if got := fmt.Sprint(positions(req)); got != "map[3:6 4:6 5:6]" || len(req.Topics) != 3 || req.SessionID != 3 || req.SessionEpoch != 1 {
		t.Fatalf("request after one of 300: lists %s in %d topics, session %d epoch %d", got, len(req.Topics), req.SessionID, req.SessionEpoch)
	}
	if ft := req.ForgottenTopics; len(ft) != 2 || ft[0].Topic != "t0" || fmt.Sprint(ft[0].Partitions) != "[9]" || ft[1].Topic != "t1" || fmt.Sprint(ft[1].Partitions) != "[10]" {
		t.Fatalf("forgets %v", req.ForgottenTopics)
	}
	if err := s.Answered(req, resp); err != nil {
		t.Fatal(err)
	}
	if req := build(nil, nil); len(req.Topics) != 0 || len(req.ForgottenTopics) != 0 || req.SessionEpoch != 2 {
		t.Fatalf("empty request lists %v, forgets %v at epoch %d", req.Topics, req.ForgottenTopics, req.SessionEpoch)
	}
	list := []int{20, 21, 22, 23}
	if n := testing.AllocsPerRun(20, func() { build(list, nil) }); n != 0 {
		t.Fatalf("building a request as large as one before allocates %v times, want 0", n)
	}
}
