package server_test

// A linearizability check of metadata operations (issue 20) with porcupine:
// clients create, delete and reconfigure topics and read them back over
// HTTP on every node while the active controller is killed and paused,
// and the history is checked against a model.
//
// What runnel promises, and so what the model allows: metadata writes go
// through the Raft log of the active controller, so they are linearizable
// (a write whose outcome the client did not learn - timeout, 5xx, a dropped
// connection - may or may not have happened). Reads are answered from the
// node's own copy of the metadata, which may lag: a node that was paused
// or cut off answers from what it had. What reads promise is that a node
// never goes back (each node's reads see the writes in order, monotonic
// reads) and read-your-writes on the node a write went through (it
// catches up with the controller before answering, admin.go). A 409 or
// 404 answer to a write is the write's outcome, so it must be linearizable
// like a success.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// metaOp is one metadata operation's input.
type metaOp struct {
	kind   string // create, delete, alter, read, list
	topic  string
	node   int    // 1..3: the node asked
	client int    // 0..metaClients-1
	value  string // create, alter: the retention.ms written
}

// metaOut is an operation's outcome.
type metaOut struct {
	unknown bool   // the outcome is not known (timeout, 5xx, no answer)
	ok      bool   // the write took effect (201, 200, 204)
	present bool   // reads: the topic exists (409 to a create says so too)
	value   string // read: its retention.ms; "" with list (any)
}

// metaClients is how many clients run operations (each one at a time).
const metaClients = 4

// metaOpsPerSecond caps the clients' operations together. The check's cost
// grows much faster than linearly with the operations per topic name, so
// the history's size must not follow the machine's speed: unthrottled, a
// fast CI machine made 9,525 operations in the short run's 12 s (3,175 a
// name) and porcupine gave up after 3 min, undecided.
const metaOpsPerSecond = 100

// metaState is the register of one topic name: every value it has had in
// the linearization order ("" absent; its retention.ms when present), the
// index of the newest each node has shown (monotonic reads), and the index
// of each client's last write through each node (read-your-writes: a
// client's operations are sequential, so its read starts after its write
// returned).
type metaState struct {
	vals  string // values joined by "|"
	seen  [4]int
	wrote [metaClients][4]int
}

func (s metaState) values() []string { return strings.Split(s.vals, "|") }

func (s metaState) write(in metaOp, v string, known bool) metaState {
	s.vals += "|" + v
	if known {
		s.wrote[in.client][in.node] = len(s.values()) - 1
	}
	return s
}

// readable returns the states after node reads out: one per version at or
// after the node's last read that matches.
func (s metaState) readable(in metaOp, out metaOut) []any {
	var next []any
	vals := s.values()
	for i := max(s.seen[in.node], s.wrote[in.client][in.node]); i < len(vals); i++ {
		if (vals[i] != "") == out.present && (out.value == "" || out.value == vals[i]) {
			n := s
			n.seen[in.node] = i
			next = append(next, n)
		}
	}
	return next
}

func (s metaState) current() string { v := s.values(); return v[len(v)-1] }

var metadataModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range history {
			t := op.Input.(metaOp).topic
			if by[t] == nil {
				names = append(names, t)
			}
			by[t] = append(by[t], op)
		}
		var out [][]porcupine.Operation
		for _, n := range names {
			out = append(out, by[n])
		}
		return out
	},
	Init: func() []any { return []any{metaState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(metaState), input.(metaOp), output.(metaOut)
		exists := s.current() != ""
		var next []any
		apply := func(v string) {
			next = append(next, s.write(in, v, !out.unknown))
		}
		switch in.kind {
		case "read", "list":
			return s.readable(in, out)
		case "create":
			switch {
			case out.unknown:
				next = append(next, s)
				if !exists {
					apply(in.value)
				}
			case out.ok && !exists:
				apply(in.value)
			case !out.ok && exists:
				next = append(next, s)
			}
		case "delete":
			switch {
			case out.unknown:
				next = append(next, s)
				if exists {
					apply("")
				}
			case out.ok && exists:
				apply("")
			case !out.ok && !exists:
				next = append(next, s)
			}
		case "alter":
			switch {
			case out.unknown:
				next = append(next, s)
				if exists {
					apply(in.value)
				}
			case out.ok && exists:
				apply(in.value)
			case !out.ok && !exists:
				next = append(next, s)
			}
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(metaState) == b.(metaState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(metaOp), output.(metaOut)
		return fmt.Sprintf("client %d: %s %s @%d %s -> %+v", in.client, in.kind, in.topic, in.node, in.value, out)
	},
	DescribeState: func(state any) string { s := state.(metaState); return fmt.Sprintf("%q seen %v", s.vals, s.seen) },
}

// metaHistory records operations with invocation and response times.
type metaHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	kinds map[string]int
}

func (h *metaHistory) add(client int, in metaOp, call time.Time, out metaOut) {
	ret := int64(time.Since(h.start))
	if out.unknown {
		ret = math.MaxInt64 // may take effect at any time after the call
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(call.Sub(h.start)), Output: out, Return: ret})
	k := in.kind
	switch {
	case out.unknown:
		k += " unknown"
	case out.ok || out.present:
		k += " ok"
	default:
		k += " no"
	}
	h.kinds[k]++
}

// metaClient runs one client's operations until ctx ends.
func metaClient(ctx context.Context, t *testing.T, c *servertest.Cluster, h *metaHistory, id int, names []string, seq func() int, pace <-chan time.Time) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	client := &http.Client{Timeout: 4 * time.Second}
	for ctx.Err() == nil {
		select {
		case <-pace:
		case <-ctx.Done():
			return
		}
		in := metaOp{topic: names[rng.IntN(len(names))], node: 1 + rng.IntN(3), client: id}
		n := c.Node(in.node)
		if n.PID() == 0 {
			continue // killed: not an operation
		}
		var method, path, body string
		switch r := rng.IntN(10); {
		case r < 2:
			in.kind, method, path = "create", http.MethodPost, "/v1/topics"
			in.value = strconv.Itoa(3600000 + seq())
			body = fmt.Sprintf(`{"name":%q,"partitions":1,"replication_factor":1,"configs":{"retention.ms":%q}}`, in.topic, in.value)
		case r < 4:
			in.kind, method, path = "delete", http.MethodDelete, "/v1/topics/"+in.topic
		case r < 5:
			in.kind, method, path = "alter", http.MethodPatch, "/v1/topics/"+in.topic+"/configs"
			in.value = strconv.Itoa(3600000 + seq())
			body = fmt.Sprintf(`{"configs":{"retention.ms":%q}}`, in.value)
		case r < 8:
			in.kind, method, path = "read", http.MethodGet, "/v1/topics/"+in.topic
		default:
			in.kind, method, path = "list", http.MethodGet, "/v1/topics"
		}
		req, err := http.NewRequest(method, n.URL+path, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		call := time.Now()
		resp, err := client.Do(req)
		var status int
		var raw []byte
		if dialFailed(err) {
			continue // the request never reached the node: not an operation
		}
		if err == nil {
			status = resp.StatusCode
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		out, keep := metaOutcome(in, status, raw)
		if keep {
			h.add(id, in, call, out)
		}
	}
}

// dialFailed reports whether err says the connection was never made (the
// node was killed or not yet listening), so the request had no effect.
// Counting such a write as one of unknown outcome would be sound, but each
// unknown write stays open to the end of the history and multiplies
// porcupine's search.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// metaOutcome classifies an answer; keep is false for an answer that says
// nothing about the state (a failed read, a refused request).
func metaOutcome(in metaOp, status int, body []byte) (out metaOut, keep bool) {
	read := in.kind == "read" || in.kind == "list"
	switch {
	case status == 0 || status >= 500:
		return metaOut{unknown: true}, !read
	case read && status == http.StatusOK && in.kind == "list":
		var l api.TopicList
		if json.Unmarshal(body, &l) != nil {
			return out, false
		}
		for _, tp := range l.Topics {
			out.present = out.present || tp.Name == in.topic
		}
		return out, true
	case read && status == http.StatusOK:
		var d api.TopicDetail
		if json.Unmarshal(body, &d) != nil {
			return out, false
		}
		return metaOut{present: true, value: d.Configs["retention.ms"]}, true
	case read && status == http.StatusNotFound:
		return metaOut{}, true
	case status >= 200 && status < 300:
		return metaOut{ok: true}, true
	case in.kind == "create" && status == http.StatusConflict:
		return metaOut{present: true}, true
	case in.kind != "create" && status == http.StatusNotFound:
		return metaOut{}, true
	}
	return out, false // 400, 429, ...: refused before it was tried
}

// runMetadataLinearizability runs the clients for d over topics names; the
// check's cost grows fast with the operations per name, so a long run
// spreads them over more names.
func runMetadataLinearizability(t *testing.T, d time.Duration, topics int) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: chaosArgs})
	h := &metaHistory{start: time.Now(), kinds: map[string]int{}}
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("lin-%d", i))
	}
	var seqMu sync.Mutex
	next := 0
	seq := func() int { seqMu.Lock(); defer seqMu.Unlock(); next++; return next }
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	pace := time.NewTicker(time.Second / metaOpsPerSecond)
	defer pace.Stop()
	var wg sync.WaitGroup
	for id := range metaClients {
		wg.Add(1)
		go func() { defer wg.Done(); metaClient(ctx, t, c, h, id, names, seq, pace.C) }()
	}
	// The faults: the active controller killed, then paused, in turn.
	var faults []string
	harness := &chaosHarness{t: t, c: c}
	for i := 0; sleepCtx(ctx, 2*time.Second); i++ {
		id := harness.controller()
		if id == 0 {
			continue
		}
		n := c.Node(id)
		if i%2 == 0 {
			faults = append(faults, fmt.Sprintf("kill -9 controller %d", id))
			n.Kill()
			sleepCtx(context.Background(), time.Second)
			n.StartNoWait()
			n.WaitReady(60 * time.Second)
		} else {
			faults = append(faults, fmt.Sprintf("SIGSTOP controller %d 3 s", id))
			n.Signal(syscall.SIGSTOP)
			sleepCtx(context.Background(), 3*time.Second)
			n.Signal(syscall.SIGCONT)
		}
	}
	wg.Wait()
	t.Logf("faults: %v", faults)
	t.Logf("%d operations: %v", len(h.ops), h.kinds)
	if h.kinds["create ok"]+h.kinds["delete ok"]+h.kinds["alter ok"] == 0 {
		t.Fatal("no write took effect")
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(metadataModel.ToModel(), h.ops, 3*time.Minute)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Error("porcupine gave up after 3 min: the history is neither shown linearizable nor not (spread it over more topics)")
	default:
		t.Error("the metadata history does not match the model (linearizable writes, monotonic reads per node, read-your-writes on the node written through)")
		if f, err := os.CreateTemp("", "runnel-metadata-history-*.html"); err == nil {
			if porcupine.Visualize(metadataModel.ToModel(), info, f) == nil {
				t.Logf("porcupine's visualization: %s", f.Name())
			}
			f.Close()
		}
		logStuck(t, h.ops, info)
	}
}

// logStuck prints, for each topic whose history has no linearization, the
// end of the longest partial one and the operations that could not follow.
func logStuck(t *testing.T, ops []porcupine.Operation, info porcupine.LinearizationInfo) {
	parts := metadataModel.Partition(ops)
	desc := func(op porcupine.Operation) string {
		ret := "never"
		if op.Return != math.MaxInt64 {
			ret = strconv.FormatInt(op.Return/1e6, 10)
		}
		return fmt.Sprintf("[%d..%s ms] %s", op.Call/1e6, ret, metadataModel.DescribeOperation(op.Input, op.Output))
	}
	for i, partials := range info.PartialLinearizations() {
		var longest []int
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(parts[i]) {
			continue
		}
		done := map[int]bool{}
		for _, id := range longest {
			done[id] = true
		}
		t.Logf("topic %s: %d of %d operations linearized; the last ones:", parts[i][0].Input.(metaOp).topic, len(longest), len(parts[i]))
		for _, id := range longest[max(0, len(longest)-6):] {
			t.Logf("    %s", desc(parts[i][id]))
		}
		var rest []porcupine.Operation
		for id, op := range parts[i] {
			if !done[id] {
				rest = append(rest, op)
			}
		}
		slices.SortFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		t.Logf("  none of these could follow:")
		for _, op := range rest[:min(6, len(rest))] {
			t.Logf("    %s", desc(op))
		}
	}
}

// The short run (make test); RUNNEL_CHAOS=1 (make chaos) runs it a minute.
// (It left make test for a while after a CI run found a write refused
// from a lagging image: an alter answered "unknown topic" while a create
// of the topic had been acknowledged. Admin writes are now refused by the
// controller's state machine only; TestAdminWriteFromLaggingNodeNotRefusedLocally.)
func TestChaosMetadataLinearizable(t *testing.T) {
	if os.Getenv("RUNNEL_CHAOS") != "" {
		runMetadataLinearizability(t, 60*time.Second, 12)
		return
	}
	runMetadataLinearizability(t, 12*time.Second, 4)
}
