package server_test

// The chaos suite (issue 20): scenarios that run real franz-go producers and
// a consumer against a 3-node cluster (RF=3, min.insync.replicas=2) while a
// fault loop kills, pauses, isolates or starves nodes, then check the
// history with chaosCheck instead of by eye. `make chaos` runs every
// scenario (RUNNEL_CHAOS=1) and rewrites the README's results table from
// the JSON lines they append to RUNNEL_CHAOS_RESULTS; `make test` runs the
// short ones.
//
// Network partitions cut the proxies between nodes (servertest.Cluster's
// Isolate), not network namespaces: every node listens on loopback, and a
// node in its own namespace would need addresses off loopback.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/internal/disktest"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/servertest"
)

const (
	chaosTopic      = "chaos"
	chaosPartitions = 3
	chaosProducers  = 3
	// Sessions short enough that a scenario sees several failovers.
	chaosSession = 3 * time.Second
)

var chaosArgs = []string{"--broker-heartbeat-interval", "300ms", "--broker-session-timeout", chaosSession.String(),
	"--replica-lag-time-max", "3s"}

// chaosScenario is one fault pattern.
type chaosScenario struct {
	name     string
	args     []string      // extra node flags
	proxied  bool          // nodes talk through cuttable proxies
	duration time.Duration // how long the fault loop runs (RUNNEL_CHAOS)
	short    time.Duration // duration in `make test`; 0: only with RUNNEL_CHAOS
	prepare  func(t *testing.T, c *servertest.Cluster)
	configs  map[string]string // the chaos topic's configs besides min.insync.replicas
	fault    func(ctx context.Context, h *chaosHarness)
}

// chaosHarness is a running scenario: the cluster and the clients' history.
type chaosHarness struct {
	t       *testing.T
	c       *servertest.Cluster
	proxied bool
	configs map[string]string
	mu      sync.Mutex

	acked    []ackedRecord // acks=all; guarded by mu
	ackedOne []ackedRecord // acks=1; guarded by mu
	failed   int           // acks=all records that failed; guarded by mu
	consumed [chaosPartitions][]ackedRecord
	lossErrs []string // franz-go data-loss reports
	faults   []string // what the fault loop did, for the log
}

type ackedRecord struct {
	partition int32
	offset    int64
	value     string
	at        time.Time
}

// chaosResult is one scenario's line in the README table.
type chaosResult = servertest.ChaosResult

func runChaos(t *testing.T, s chaosScenario) {
	d := s.short
	if os.Getenv("RUNNEL_CHAOS") != "" {
		d = s.duration
	}
	if d == 0 {
		t.Skip("chaos scenario: set RUNNEL_CHAOS=1 (make chaos)")
	}
	c := servertest.NewCluster(t, servertest.ClusterOptions{Combined: 3, Proxied: s.proxied, Args: append(slices.Clone(chaosArgs), s.args...)})
	keepLogsOnFailure(t, c)
	if s.prepare != nil {
		s.prepare(t, c)
	}
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	for _, n := range c.Nodes {
		n.WaitReady(60 * time.Second)
	}
	h := &chaosHarness{t: t, c: c, proxied: s.proxied, configs: s.configs}
	h.createTopic()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients sync.WaitGroup
	for i := range chaosProducers {
		clients.Add(1)
		go func() { defer clients.Done(); h.produce(ctx, i, kgo.AllISRAcks()) }()
	}
	clients.Add(2)
	go func() { defer clients.Done(); h.produce(ctx, -1, kgo.LeaderAck()) }()
	consumerCtx, stopConsumer := context.WithCancel(context.Background())
	defer stopConsumer()
	go func() { defer clients.Done(); h.consume(consumerCtx) }()

	h.waitAcked(20) // the clients are running before the faults start
	faultStart := time.Now()
	fctx, stopFaults := context.WithTimeout(ctx, d)
	h.fault(fctx, s.fault)
	stopFaults()
	faultEnd := time.Now()
	h.heal()
	h.waitAcked(h.ackedCount() + 50) // writes flow again after the faults
	cancel()                         // the producers flush what they hold and stop
	h.waitConverged()
	h.waitConsumed()
	stopConsumer()
	clients.Wait()

	res := h.check(s.name, faultStart, faultEnd)
	res.Seconds = faultEnd.Sub(faultStart).Seconds()
	h.report(res)
}

// keepLogsOnFailure writes every node's output to RUNNEL_CHAOS_LOGS/<test>/
// node-<id>.log when the scenario fails, or always with
// RUNNEL_CHAOS_LOGS_ALL=1 (RUNNEL_LOG_LEVEL=debug in the environment
// reaches the nodes), so a failure seen once can be read after.
func keepLogsOnFailure(t *testing.T, c *servertest.Cluster) {
	dir := os.Getenv("RUNNEL_CHAOS_LOGS")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("RUNNEL_CHAOS_LOGS_ALL") == "" {
			return
		}
		dir := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+time.Now().Format("-150405"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Log(err)
			return
		}
		for i, n := range c.Nodes {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)), []byte(n.Logs()), 0o644); err != nil {
				t.Log(err)
			}
		}
		if t.Failed() {
			dumpReplicaTails(t, c, dir)
		}
		t.Logf("node logs in %s", dir)
	})
}

// dumpReplicaTails writes, for a failed scenario, each node's batches of
// the chaos partitions as they are on disk (base offset, last offset,
// leader epoch; the last 40 in full, the epoch runs before) and its
// state file (its leader epochs), read from a copy of the partition's directory
// (the nodes may still run), to dir/replicas.txt.
func dumpReplicaTails(t *testing.T, c *servertest.Cluster, dir string) {
	var out strings.Builder
	for i, n := range c.Nodes {
		for p := range chaosPartitions {
			src := filepath.Join(n.DataDir, "partitions", fmt.Sprintf("%s-%d", chaosTopic, p))
			tmp, err := os.MkdirTemp("", "chaos-replica-")
			if err != nil {
				t.Log(err)
				return
			}
			cp := filepath.Join(tmp, "replica")
			if err := os.CopyFS(cp, os.DirFS(src)); err != nil {
				os.RemoveAll(tmp)
				fmt.Fprintf(&out, "node %d partition %d: copy: %v\n", i+1, p, err)
				continue
			}
			// The leader epochs are in log.state (epoch lines).
			ckpt, _ := os.ReadFile(filepath.Join(cp, "log.state"))
			fmt.Fprintf(&out, "node %d partition %d: state %q\n", i+1, p, ckpt)
			log, err := segments.Open(cp, segments.DefaultConfig(), segments.Options{})
			if err != nil {
				fmt.Fprintf(&out, "  open: %v\n", err)
				os.RemoveAll(tmp)
				continue
			}
			var bases, lasts []int64
			var epochs []int32
			for off := log.StartOffset(); off < log.EndOffset(); {
				ch, err := log.Read(off, 1<<20, log.EndOffset())
				if err != nil {
					fmt.Fprintf(&out, "  read %d: %v\n", off, err)
					break
				}
				b, err := ch.Bytes()
				ch.Close()
				if err != nil || len(b) == 0 {
					fmt.Fprintf(&out, "  read %d: %v (%d bytes)\n", off, err, len(b))
					break
				}
				for rest := b; len(rest) > 0; {
					var batch kmsg.RecordBatch
					if err := batch.ReadFrom(rest); err != nil {
						break
					}
					bases = append(bases, batch.FirstOffset)
					lasts = append(lasts, batch.FirstOffset+int64(batch.LastOffsetDelta))
					epochs = append(epochs, batch.PartitionLeaderEpoch)
					off = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
					rest = rest[12+int(batch.Length):]
				}
			}
			fmt.Fprintf(&out, "  start %d end %d; epochs %s\n", log.StartOffset(), log.EndOffset(), compactEpochs(epochs, bases))
			for j := max(0, len(bases)-40); j < len(bases); j++ {
				fmt.Fprintf(&out, "  %d-%d@%d\n", bases[j], lasts[j], epochs[j])
			}
			log.Close()
			os.RemoveAll(tmp)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "replicas.txt"), []byte(out.String()), 0o644); err != nil {
		t.Log(err)
	}
}

func (h *chaosHarness) createTopic() {
	client := &http.Client{Timeout: 15 * time.Second}
	configs := map[string]string{"min.insync.replicas": "2"}
	maps.Copy(configs, h.configs)
	cj, _ := json.Marshal(configs)
	body := fmt.Sprintf(`{"name":%q,"partitions":%d,"replication_factor":3,"configs":%s}`, chaosTopic, chaosPartitions, cj)
	resp, err := client.Post(h.c.Node(1).URL+"/v1/topics", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusCreated {
		h.t.Fatalf("create %s: %v %v", chaosTopic, err, resp)
	}
	resp.Body.Close()
	h.waitISR(60 * time.Second)
}

// waitISR waits until every partition has all three replicas in sync, as
// every running node sees it.
func (h *chaosHarness) waitISR(timeout time.Duration) {
	servertest.WaitFor(h.t, timeout, "every partition's ISR back to three on every node", func() bool {
		for _, n := range h.c.Nodes {
			ps, ok := describe(n, chaosTopic)
			if !ok || len(ps) != chaosPartitions {
				return false
			}
			for _, p := range ps {
				if len(p.ISR) != 3 || p.Leader < 1 {
					return false
				}
			}
		}
		return true
	})
}

func (h *chaosHarness) seeds() []string {
	var out []string
	for _, n := range h.c.Nodes {
		out = append(out, n.KafkaAddr)
	}
	return out
}

// produce writes values "p<id>-<seq>" (id -1: acks=1 values "one-<seq>")
// round-robin over the partitions until ctx ends, recording every
// acknowledgement.
func (h *chaosHarness) produce(ctx context.Context, id int, acks kgo.Acks) {
	opts := []kgo.Opt{kgo.SeedBrokers(h.seeds()...), kgo.DefaultProduceTopic(chaosTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(64),
		kgo.ProducerLinger(time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		// Client-side waits kept short, so the windows measure the
		// cluster: a metadata answer from a node that has not seen the
		// new leader yet is asked again soon (default: after 5 s), and a
		// request to a paused node is given up after about 6 s (default:
		// 20 s, the whole of a long pause).
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.ProduceRequestTimeout(4 * time.Second),
		kgo.RequestTimeoutOverhead(2 * time.Second)}
	if path := os.Getenv("RUNNEL_CHAOS_KGO_LOG"); path != "" && id == 0 {
		// What franz-go saw (errors, metadata refreshes), to split a
		// window into the cluster's part and the client's.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			h.t.Error(err)
			return
		}
		defer f.Close()
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	prefix := fmt.Sprintf("p%d-", id)
	if id < 0 {
		prefix = "one-"
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		h.t.Error(err)
		return
	}
	defer cl.Close()
	var inflight sync.WaitGroup
	for seq := 0; ctx.Err() == nil; seq++ {
		r := &kgo.Record{Value: []byte(prefix + strconv.Itoa(seq)), Partition: int32(seq % chaosPartitions)}
		inflight.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer inflight.Done()
			h.mu.Lock()
			defer h.mu.Unlock()
			switch {
			case err == nil && id < 0:
				h.ackedOne = append(h.ackedOne, ackedRecord{r.Partition, r.Offset, string(r.Value), time.Now()})
			case err == nil:
				h.acked = append(h.acked, ackedRecord{r.Partition, r.Offset, string(r.Value), time.Now()})
			case id >= 0 && !errors.Is(err, context.Canceled):
				h.failed++
			}
		})
		if id < 0 {
			time.Sleep(5 * time.Millisecond) // acks=1 is a side stream
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Flush(fctx)
	inflight.Wait()
}

// consume reads every partition from the start with a plain (group-less)
// consumer and records what it was given.
func (h *chaosHarness) consume(ctx context.Context) {
	parts := map[int32]kgo.Offset{}
	for p := range int32(chaosPartitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTopic: parts}), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		h.t.Error(err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			var loss *kgo.ErrDataLoss
			if errors.As(err, &loss) {
				h.mu.Lock()
				h.lossErrs = append(h.lossErrs, err.Error())
				h.mu.Unlock()
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			h.mu.Lock()
			h.consumed[r.Partition] = append(h.consumed[r.Partition], ackedRecord{r.Partition, r.Offset, string(r.Value), time.Now()})
			h.mu.Unlock()
		})
	}
}

func (h *chaosHarness) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

func (h *chaosHarness) waitAcked(n int) {
	servertest.WaitFor(h.t, 120*time.Second, fmt.Sprintf("%d acks=all writes acknowledged", n), func() bool {
		return h.ackedCount() >= n
	})
}

// waitConverged waits for full ISRs, equal log ends on every node and equal
// metadata digests.
func (h *chaosHarness) waitConverged() {
	h.waitISR(120 * time.Second)
	var last strings.Builder // what the nodes said last, logged if they never agree
	defer func() {
		if h.t.Failed() {
			h.t.Logf("last seen (node: partition leader/epoch isr hw/end):\n%s", last.String())
		}
	}()
	servertest.WaitFor(h.t, 60*time.Second, "high watermark at the log end on every node", func() bool {
		var ends []int64
		atEnd := true
		last.Reset()
		for i, n := range h.c.Nodes {
			ps, ok := describe(n, chaosTopic)
			if !ok {
				fmt.Fprintf(&last, "node %d: no answer\n", i+1)
				return false
			}
			fmt.Fprintf(&last, "node %d:", i+1)
			for _, p := range ps {
				fmt.Fprintf(&last, " p%d %d/%d %v %d/%d;", p.Partition, p.Leader, p.LeaderEpoch, p.ISR, p.HighWatermark, p.EndOffset)
			}
			last.WriteString("\n")
			for _, p := range ps {
				atEnd = atEnd && p.HighWatermark == p.EndOffset
				ends = append(ends, p.EndOffset)
			}
		}
		for i := chaosPartitions; i < len(ends); i++ {
			atEnd = atEnd && ends[i] == ends[i%chaosPartitions]
		}
		return atEnd
	})
}

// waitConsumed waits until the consumer reached every partition's end.
func (h *chaosHarness) waitConsumed() {
	ps, _ := describe(h.c.Node(1), chaosTopic)
	servertest.WaitFor(h.t, 60*time.Second, "the consumer at every partition's end", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, p := range ps {
			got := h.consumed[p.Partition]
			if p.EndOffset > 0 && (len(got) == 0 || got[len(got)-1].offset < p.EndOffset-1) {
				return false
			}
		}
		return true
	})
}

// fault runs the scenario's fault loop, logging what it did.
func (h *chaosHarness) fault(ctx context.Context, f func(context.Context, *chaosHarness)) {
	if f != nil {
		f(ctx, h)
	}
}

func (h *chaosHarness) logFault(format string, args ...any) {
	line := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	h.t.Log(line) // now, so a scenario that fails before its check has it
	h.mu.Lock()
	h.faults = append(h.faults, line)
	h.mu.Unlock()
}

// heal restarts killed nodes, resumes paused ones and joins partitions.
func (h *chaosHarness) heal() {
	for i, n := range h.c.Nodes {
		if n.PID() != 0 {
			n.Signal(syscall.SIGCONT)
		}
		if h.proxied {
			h.c.Heal(i + 1)
		}
	}
	for i, n := range h.c.Nodes {
		if n.PID() == 0 {
			h.logFault("restart node %d", i+1)
			n.Start()
		}
	}
}

// leaderOf returns the leader of partition p as the node with the newest
// view (the highest leader epoch among the nodes that answer) sees it.
func (h *chaosHarness) leaderOf(p int32) int {
	best, epoch := 0, int32(-1)
	for _, n := range h.c.Nodes {
		if n.PID() == 0 {
			continue
		}
		ps, ok := describe(n, chaosTopic)
		if ok && int(p) < len(ps) && ps[p].Leader > 0 && ps[p].LeaderEpoch > epoch {
			best, epoch = int(ps[p].Leader), ps[p].LeaderEpoch
		}
	}
	return best
}

// controller returns the active controller's id as the nodes see it.
func (h *chaosHarness) controller() int {
	for _, n := range h.c.Nodes {
		if n.PID() == 0 {
			continue
		}
		if v, ok := cluster(n); ok && v.LeaderID > 0 {
			return int(v.LeaderID)
		}
	}
	return 0
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// The fault loops.

func killLoop(pick func(*chaosHarness) int, down time.Duration) func(context.Context, *chaosHarness) {
	return func(ctx context.Context, h *chaosHarness) {
		for sleepCtx(ctx, 2*time.Second) {
			id := pick(h)
			if id == 0 {
				continue
			}
			h.logFault("kill -9 node %d", id)
			h.c.Node(id).Kill()
			sleepCtx(context.Background(), down)
			h.logFault("restart node %d", id)
			h.c.Node(id).Start()
			h.waitISR(120 * time.Second)
		}
	}
}

func pauseLoop(pick func(*chaosHarness) int, paused, between time.Duration) func(context.Context, *chaosHarness) {
	return func(ctx context.Context, h *chaosHarness) {
		for sleepCtx(ctx, between) {
			id := pick(h)
			if id == 0 {
				continue
			}
			h.logFault("SIGSTOP node %d", id)
			h.c.Node(id).Signal(syscall.SIGSTOP)
			sleepCtx(context.Background(), paused)
			h.logFault("SIGCONT node %d", id)
			h.c.Node(id).Signal(syscall.SIGCONT)
		}
	}
}

func isolateLoop(pick func(*chaosHarness) int, cut, between time.Duration) func(context.Context, *chaosHarness) {
	return func(ctx context.Context, h *chaosHarness) {
		for sleepCtx(ctx, between) {
			id := pick(h)
			if id == 0 {
				continue
			}
			h.logFault("isolate node %d", id)
			h.c.Isolate(id)
			sleepCtx(context.Background(), cut)
			h.logFault("heal node %d", id)
			h.c.Heal(id)
		}
	}
}

func rollingRestart(ctx context.Context, h *chaosHarness) {
	for ctx.Err() == nil {
		for id := 1; id <= 3 && ctx.Err() == nil; id++ {
			h.logFault("restart node %d (SIGTERM)", id)
			h.c.Node(id).Stop()
			h.c.Node(id).Start()
			h.waitISR(120 * time.Second)
			sleepCtx(ctx, time.Second)
		}
	}
}

func p0Leader(h *chaosHarness) int { return h.leaderOf(0) }

func activeController(h *chaosHarness) int { return h.controller() }

// check reads every replica from disk (the nodes stopped) and compares the
// history with it.
func (h *chaosHarness) check(name string, faultStart, faultEnd time.Time) chaosResult {
	t := h.t
	digests := map[string]bool{}
	servertest.WaitFor(t, 30*time.Second, "equal metadata digests", func() bool {
		clear(digests)
		for _, n := range h.c.Nodes {
			v, ok := cluster(n)
			if !ok {
				return false
			}
			digests[v.Node.MetadataDigest] = true
		}
		return len(digests) == 1
	})
	for _, n := range h.c.Nodes {
		n.Stop()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	res := chaosResult{Scenario: name, Faults: len(h.faults), Acked: len(h.acked), AckedOne: len(h.ackedOne),
		DataLossSeen: len(h.lossErrs), ReplicasEqual: true, EpochsOrdered: true, DigestsEqual: len(digests) == 1}
	logs := make([]map[int64]string, chaosPartitions)
	for p := range int32(chaosPartitions) {
		var first replicaLog
		for i, n := range h.c.Nodes {
			r := readReplica(t, n, p)
			if !slices.IsSorted(r.epochs) {
				res.EpochsOrdered = false
				t.Errorf("node %d partition %d: batch leader epochs go backwards: %v", i+1, p, compactEpochs(r.epochs, r.bases))
			}
			if i == 0 {
				first = r
				continue
			}
			if !bytes.Equal(r.raw, first.raw) || !bytes.Equal(r.epochEnds, first.epochEnds) {
				res.ReplicasEqual = false
				t.Errorf("partition %d: node %d's replica differs from node 1's (%d vs %d bytes; epochs %v vs %v; epoch ends %q vs %q)%s",
					p, i+1, len(r.raw), len(first.raw), compactEpochs(r.epochs, r.bases), compactEpochs(first.epochs, first.bases), r.epochEnds, first.epochEnds,
					firstDifference(first, r, i+1))
			}
		}
		logs[p] = first.values
	}
	// acks=all: at the acknowledged offset, exactly once.
	where := map[string]int{}
	for _, l := range logs {
		for _, v := range l {
			where[v]++
		}
	}
	for _, a := range h.acked {
		if logs[a.partition][a.offset] != a.value {
			res.Lost++
			if res.Lost <= 5 {
				t.Errorf("acknowledged %q at %d-%d, the log holds %q", a.value, a.partition, a.offset, logs[a.partition][a.offset])
			}
		}
	}
	for v, n := range where {
		if n > 1 && !strings.HasPrefix(v, "one-") {
			res.Duplicated++
			if res.Duplicated <= 5 {
				t.Errorf("%q stored %d times", v, n)
			}
		}
	}
	// Per-producer order: each producer's sequence numbers increase with
	// the offsets of a partition.
	for p, l := range logs {
		last := map[string]int{}
		offs := mapKeys(l)
		slices.Sort(offs)
		for _, off := range offs {
			prod, seq, ok := strings.Cut(l[off], "-")
			n, err := strconv.Atoi(seq)
			if !ok || err != nil || prod == "one" {
				continue
			}
			if prev, seen := last[prod]; seen && n <= prev {
				res.OrderBroken++
				if res.OrderBroken <= 5 {
					t.Errorf("partition %d offset %d: %s after %s-%d", p, off, l[off], prod, prev)
				}
			}
			last[prod] = n
		}
	}
	for _, a := range h.ackedOne {
		if logs[a.partition][a.offset] != a.value {
			res.LostOne++
			if res.LostOne <= 5 { // when, beside the fault times logged: inherent to acks=1 or not
				t.Logf("acks=1 %s acknowledged at %s at %d-%d is not in the final log (%q there)",
					a.value, a.at.Format("15:04:05.000"), a.partition, a.offset, logs[a.partition][a.offset])
			}
		}
	}
	// The consumer: gaps below what it reached, offsets given twice,
	// values the final log does not hold there (dirty reads).
	for p, got := range h.consumed {
		seen := map[int64]bool{}
		maxOff := int64(-1)
		for _, r := range got {
			if seen[r.offset] {
				res.ConsumerDups++
			}
			seen[r.offset] = true
			maxOff = max(maxOff, r.offset)
			if logs[p][r.offset] != r.value {
				res.DirtyReads++
				if res.DirtyReads <= 5 {
					t.Errorf("consumer read %q at %d-%d; the log holds %q", r.value, p, r.offset, logs[p][r.offset])
				}
			}
		}
		for off := range logs[p] {
			if off <= maxOff && !seen[off] {
				res.ConsumerGaps++
			}
		}
	}
	if res.ConsumerGaps > 0 {
		t.Errorf("the consumer skipped %d records", res.ConsumerGaps)
	}
	for i, e := range h.lossErrs {
		if i < 5 {
			t.Errorf("consumer: %s", e)
		}
	}
	if !res.DigestsEqual {
		t.Errorf("metadata digests differ between nodes: %v", mapKeys(digests))
	}
	worst, p, at := maxUnavailable(h.acked, faultStart, faultEnd)
	res.Unavailable = worst.Seconds()
	t.Logf("longest time without an acks=all acknowledgement: %v on partition %d, from %s", worst.Round(time.Millisecond), p, at.Format("15:04:05.000"))
	if res.Acked == 0 {
		t.Error("nothing acknowledged")
	}
	return res
}

// maxUnavailable is the longest time in [from, to] with no acks=all write
// acknowledged on some partition (client-side retry backoff included).
func maxUnavailable(acked []ackedRecord, from, to time.Time) (worst time.Duration, worstP int32, worstAt time.Time) {
	for p := range int32(chaosPartitions) {
		var ts []time.Time
		for _, a := range acked {
			if a.partition == p {
				ts = append(ts, a.at)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		prev := from
		for _, at := range ts {
			if at.Before(from) {
				continue
			}
			if gap := at.Sub(prev); gap > worst {
				worst, worstP, worstAt = gap, p, prev
			}
			prev = at
			if at.After(to) {
				break
			}
		}
	}
	return worst, worstP, worstAt
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// replicaLog is one stopped node's copy of a partition.
type replicaLog struct {
	raw       []byte
	values    map[int64]string
	epochs    []int32 // per batch, in offset order
	bases     []int64
	sizes     []int  // bytes per batch
	epochEnds []byte // leader epochs: epoch:end@largest epoch <= it, per epoch
}

// firstDifference describes where two replicas' batches first differ:
// the batches around it on both, as base-last@epoch (bytes) "first value".
func firstDifference(a, b replicaLog, node int) string {
	i, pa, pb := 0, 0, 0
	for ; i < len(a.bases) && i < len(b.bases); i++ {
		if a.sizes[i] != b.sizes[i] || !bytes.Equal(a.raw[pa:pa+a.sizes[i]], b.raw[pb:pb+b.sizes[i]]) {
			break
		}
		pa, pb = pa+a.sizes[i], pb+b.sizes[i]
	}
	show := func(r replicaLog) string {
		var sb strings.Builder
		for j := max(0, i-2); j < min(len(r.bases), i+4); j++ {
			next := r.epochs[j]
			last := int64(-1)
			if j+1 < len(r.bases) {
				last = r.bases[j+1] - 1
			}
			fmt.Fprintf(&sb, " %d-%d@%d (%d bytes) %q;", r.bases[j], last, next, r.sizes[j], r.values[r.bases[j]])
		}
		return sb.String()
	}
	return fmt.Sprintf("\nfirst different batch #%d; node 1:%s\nnode %d:%s", i, show(a), node, show(b))
}

func readReplica(t *testing.T, n *servertest.Node, p int32) replicaLog {
	t.Helper()
	dir := filepath.Join(n.DataDir, "partitions", fmt.Sprintf("%s-%d", chaosTopic, p))
	log, err := segments.Open(dir, segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer log.Close()
	r := replicaLog{values: map[int64]string{}}
	for off := log.StartOffset(); off < log.EndOffset(); {
		c, err := log.Read(off, 1<<20, log.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Bytes()
		c.Close()
		if err != nil || len(b) == 0 {
			t.Fatalf("read %s at %d: %v", dir, off, err)
		}
		next := off
		for rest := b; len(rest) > 0; {
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(rest); err != nil {
				t.Fatalf("%s at %d: %v", dir, next, err)
			}
			size := 12 + int(batch.Length)
			r.raw = append(r.raw, rest[:size]...)
			r.epochs = append(r.epochs, batch.PartitionLeaderEpoch)
			r.bases = append(r.bases, batch.FirstOffset)
			r.sizes = append(r.sizes, size)
			for _, rec := range batchRecords(t, batch) {
				r.values[batch.FirstOffset+int64(rec.OffsetDelta)] = string(rec.Value)
			}
			next = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			rest = rest[size:]
		}
		off = next
	}
	// The replica's leader epochs (kept in log.state, the
	// leader-epoch-checkpoint file of older releases): its answer to
	// OffsetForLeaderEpoch for every epoch its batches carry and one past.
	var answers strings.Builder
	top := int32(-1)
	for _, e := range r.epochs {
		top = max(top, e)
	}
	for e := int32(0); e <= top+1; e++ {
		got, end, err := log.EndOffsetForEpoch(e)
		if err != nil {
			t.Fatalf("%s: end offset for epoch %d: %v", dir, e, err)
		}
		fmt.Fprintf(&answers, "%d:%d@%d ", e, end, got)
	}
	r.epochEnds = []byte(answers.String())
	return r
}

// batchRecords decodes an uncompressed batch's records (the producers
// write without compression).
func batchRecords(t *testing.T, b kmsg.RecordBatch) []kmsg.Record {
	t.Helper()
	if b.Attributes&0x7 != 0 {
		t.Fatalf("compressed batch at %d", b.FirstOffset)
	}
	out := make([]kmsg.Record, 0, b.NumRecords)
	in := b.Records
	for range b.NumRecords {
		length, n := uvarint32(in)
		if n <= 0 || n+int(length) > len(in) {
			t.Fatalf("bad record in batch at %d", b.FirstOffset)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(in[:n+int(length)]); err != nil {
			t.Fatalf("record in batch at %d: %v", b.FirstOffset, err)
		}
		out = append(out, rec)
		in = in[n+int(length):]
	}
	return out
}

// uvarint32 reads a zig-zag varint (Kafka's record length).
func uvarint32(b []byte) (int32, int) {
	var x uint32
	var s uint
	for i, c := range b {
		if i == 5 {
			return 0, -1
		}
		if c < 0x80 {
			x |= uint32(c) << s
			return int32(x>>1) ^ -int32(x&1), i + 1
		}
		x |= uint32(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// compactEpochs prints epoch runs as epoch@first-offset.
func compactEpochs(epochs []int32, bases []int64) string {
	var sb strings.Builder
	for i, e := range epochs {
		if i == 0 || e != epochs[i-1] {
			fmt.Fprintf(&sb, "%d@%d ", e, bases[i])
		}
	}
	return strings.TrimSpace(sb.String())
}

// report logs the result and appends it to RUNNEL_CHAOS_RESULTS.
func (h *chaosHarness) report(res chaosResult) {
	line, _ := json.Marshal(res)
	h.t.Logf("result: %s", line)
	path := os.Getenv("RUNNEL_CHAOS_RESULTS")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		h.t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		h.t.Error(err)
	}
}

// The scenarios. Durations are for `make chaos`; the short ones also run in
// `make test`.

func TestChaosLeaderKill9(t *testing.T) {
	runChaos(t, chaosScenario{name: "kill -9 partition leader", duration: 60 * time.Second, short: 12 * time.Second,
		fault: killLoop(p0Leader, time.Second)})
}

func TestChaosControllerKill9(t *testing.T) {
	runChaos(t, chaosScenario{name: "kill -9 active controller", duration: 60 * time.Second,
		fault: killLoop(activeController, time.Second)})
}

func TestChaosLeaderPause(t *testing.T) {
	runChaos(t, chaosScenario{name: "SIGSTOP partition leader 6 s", duration: 60 * time.Second, short: 14 * time.Second,
		fault: pauseLoop(p0Leader, 6*time.Second, 6*time.Second)})
}

// Leadership moves away from a paused leader and back once it is in sync
// (preferred leader election every second).
func TestChaosLeaderBounce(t *testing.T) {
	runChaos(t, chaosScenario{name: "leadership bounces (pause 4 s, rebalance 1 s)", duration: 60 * time.Second,
		args:  []string{"--leader-rebalance-interval", "1s"},
		fault: pauseLoop(p0Leader, 4*time.Second, 4*time.Second)})
}

// A leader paused far longer than the session, then leading again (issue
// 20, item 2: consumers restarted from offset 0).
func TestChaosLongPauseThenLeadAgain(t *testing.T) {
	runChaos(t, chaosScenario{name: "SIGSTOP partition leader 20 s, leads again", duration: 60 * time.Second,
		args:  []string{"--leader-rebalance-interval", "2s"},
		fault: pauseLoop(p0Leader, 20*time.Second, 8*time.Second)})
}

func TestChaosControllerPause(t *testing.T) {
	runChaos(t, chaosScenario{name: "SIGSTOP active controller 5 s", duration: 60 * time.Second,
		fault: pauseLoop(activeController, 5*time.Second, 5*time.Second)})
}

func TestChaosRollingRestart(t *testing.T) {
	runChaos(t, chaosScenario{name: "rolling restart (SIGTERM)", duration: 60 * time.Second, fault: rollingRestart})
}

func TestChaosIsolateLeader(t *testing.T) {
	runChaos(t, chaosScenario{name: "partition leader cut off 6 s", duration: 60 * time.Second, proxied: true,
		fault: isolateLoop(p0Leader, 6*time.Second, 6*time.Second)})
}

// One node's disk fills up and is freed again: it gives up leadership and
// leaves the ISRs while full (--min-free-disk), catches up after.
func TestChaosFullDisk(t *testing.T) {
	var parts string
	runChaos(t, chaosScenario{name: "one node's disk full 8 s", duration: 60 * time.Second,
		args: []string{"--storage-retry-interval", "200ms"},
		prepare: func(t *testing.T, c *servertest.Cluster) {
			parts = filepath.Join(c.Node(3).DataDir, "partitions")
			// Room for everything the scenario writes, so only the
			// ballast fills it: on a quiet machine the checker writes
			// ~7.5 million records (~220 MiB) in the 60 s, and a
			// 128 MiB disk filled with real data left node 3 unable to
			// catch up after the ballast went (out of the ISRs for
			// good, which is right for a full disk, not the fault
			// meant here).
			disktest.MountTmpfs(t, parts, 1<<30)
		},
		fault: func(ctx context.Context, h *chaosHarness) {
			ballast := filepath.Join(parts, "ballast")
			for sleepCtx(ctx, 8*time.Second) {
				h.logFault("fill node 3's disk")
				disktest.FillDisk(h.t, ballast)
				sleepCtx(context.Background(), 8*time.Second)
				h.logFault("free node 3's disk")
				if err := os.Remove(ballast); err != nil {
					h.t.Error(err)
				}
			}
		}})
}

// Two of the three nodes die together (the metadata quorum and the
// partitions' ISRs are lost) and come back.
func TestChaosQuorumLoss(t *testing.T) {
	runChaos(t, chaosScenario{name: "quorum loss: kill -9 two nodes 5 s", duration: 60 * time.Second,
		fault: func(ctx context.Context, h *chaosHarness) {
			for sleepCtx(ctx, 8*time.Second) {
				ctrl := h.controller()
				if ctrl == 0 {
					continue
				}
				other := ctrl%3 + 1
				h.logFault("kill -9 nodes %d and %d", ctrl, other)
				h.c.Node(ctrl).Kill()
				h.c.Node(other).Kill()
				sleepCtx(context.Background(), 5*time.Second)
				h.logFault("restart nodes %d and %d", ctrl, other)
				h.c.Node(ctrl).StartNoWait()
				h.c.Node(other).StartNoWait()
				h.c.Node(ctrl).WaitReady(60 * time.Second)
				h.c.Node(other).WaitReady(60 * time.Second)
				h.waitISR(120 * time.Second)
			}
		}})
}
