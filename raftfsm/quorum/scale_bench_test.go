package quorum_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// scalePartitions is the partition count of BenchmarkControllerScale:
// RUNNEL_BENCH_PARTITIONS, else 100,000 under RUNNEL_BENCH=1 (make bench),
// else a small count so that bench-short stays quick.
func scalePartitions(b *testing.B) int {
	if v := os.Getenv("RUNNEL_BENCH_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("RUNNEL_BENCH_PARTITIONS=%q", v)
		}
		return n
	}
	if os.Getenv("RUNNEL_BENCH") == "1" {
		return 100_000
	}
	return 3_000
}

// BenchmarkControllerScale: three combined nodes in one process (each a
// voter and a registered broker), topics of up to 10,000 partitions with
// replication factor 2 up to the partition count. It reports the seconds
// to create them, the snapshot's size and time, a controlled shutdown of a
// broker leading a third of them, a controller failover (the leader's
// connections ended and its port refusing, as after a kill -9, until a
// survivor applies a command), the old leader's Close, and the
// restart of the closed node until it is ready and caught up, and the
// failover when the active controller closes (a SIGTERM). It also
// counts the raft elections before the failover (leadership churn under
// the run's load), those the failover took (1 unless votes split) and
// how many of them the leader watch started (crash_elections: 1 when a
// survivor stood at once, 0 when raft's timeout elected the leader).
// The killed controller is also a broker, leading the other two thirds
// by then: the new controller fences it at once (its port refuses) and
// moves those leaderships, about 67 raft entries at 2,000,000 partitions,
// while the killed node restarts and, when they take longer, while the
// active controller closes (close_failover_s then includes its
// successor's applying them).
//
// RUNNEL_BENCH_SHUTDOWN_CPUPROFILE=file writes a CPU profile of the
// controlled shutdown alone, RUNNEL_BENCH_RESTART_CPUPROFILE of the
// restart; RUNNEL_BENCH_ELECTION_TIMEOUT=duration sets
// the raft election timeout (Config.ElectionTimeout) to measure failover
// against it; RUNNEL_BENCH_LOGS=dir writes the nodes' logs there (when
// each move, election and hand-over happened).
func BenchmarkControllerScale(b *testing.B) {
	total := scalePartitions(b)
	for range b.N {
		runScale(b, total)
	}
}

func runScale(b *testing.B, total int) {
	q := newQuorum(b, 3, 0, func(c *quorum.Config) {
		c.HeartbeatInterval = 500 * time.Millisecond
		c.SessionTimeout = 5 * time.Second
		c.SnapshotThreshold = 1 << 20 // snapshots only when asked
		c.SnapshotInterval = time.Hour
		if v := os.Getenv("RUNNEL_BENCH_ELECTION_TIMEOUT"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				b.Fatalf("RUNNEL_BENCH_ELECTION_TIMEOUT=%q", v)
			}
			c.ElectionTimeout = d
		}
	})
	var phases strings.Builder // when each phase began and ended, beside the nodes' logs
	phase := func(format string, a ...any) {
		fmt.Fprintf(&phases, "time=%s phase=%q\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, a...))
	}
	defer func() {
		for i := range q.nodes {
			q.stop(i)
		}
		writeLogs(b, q, phases.String())
	}()
	q.waitReady()
	for i := range 3 {
		q.register(i, "")
	}
	ctx := context.Background()
	// Raft terms count elections (pre-vote rounds that fail do not raise
	// the term): those before the failover are leadership churn under
	// the run's load, which a shorter election timeout must not cause.
	term0 := q.maxTerm()

	start := time.Now()
	const perTopic = 10_000
	for made, t := 0, 0; made < total; t++ {
		n := min(perTopic, total-made)
		q.applyOn(0, createTopic(fmt.Sprintf("scale-%05d", t), int32(n), 2))
		made += n
	}
	create := time.Since(start)

	lead := q.leader()
	start = time.Now()
	if err := q.nodes[lead].Snapshot(); err != nil {
		b.Fatal(err)
	}
	snapTime := time.Since(start)
	snapBytes := dirBytes(b, filepath.Join(q.cfgs[lead].Dir, "snapshots"))

	broker := (lead + 1) % 3
	stopProfile := startProfile(b, os.Getenv("RUNNEL_BENCH_SHUTDOWN_CPUPROFILE"))
	start, ru0 := time.Now(), rusage(b)
	phase("controlled shutdown of node %d", broker+1)
	if err := q.nodes[broker].ControlledShutdown(ctx); err != nil {
		b.Fatal(err)
	}
	shutdown, ru1 := time.Since(start), rusage(b)
	phase("controlled shutdown done")
	shutdownCPU := ru1.cpu() - ru0.cpu()
	stopProfile()
	img, _ := q.nodes[broker].Image()
	led := 0
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			if p.Leader == q.cfgs[broker].NodeID {
				led++
			}
		}
	}
	if led != 0 {
		b.Fatalf("broker still leads %d partitions after a controlled shutdown", led)
	}

	// Failover after a kill: the active controller's connections to and
	// from the others end and its port refuses connections (q.crash), until
	// a survivor takes a write; closing it (what a SIGTERM adds) is timed
	// apart.
	// The leader now: on a loaded machine it may have changed since.
	lead = q.leader()
	survivor := (lead + 1) % 3
	term1 := q.maxTerm()
	start = time.Now()
	phase("crash of node %d, write through node %d", lead+1, survivor+1)
	q.crash(lead)
	q.applyOn(survivor, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
	failover := time.Since(start)
	phase("written after the crash")
	failoverElections := q.nodes[survivor].Status().Term - term1
	crashElections := crashElections(q, lead)
	start = time.Now()
	q.stop(lead)
	closeTime := time.Since(start)
	q.uncrash(lead)

	stopProfile = startProfile(b, os.Getenv("RUNNEL_BENCH_RESTART_CPUPROFILE"))
	start = time.Now()
	phase("restart of node %d", lead+1)
	q.start(lead)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := q.nodes[lead].WaitReady(rctx); err != nil {
		b.Fatal(err)
	}
	restart := time.Since(start)
	phase("node %d ready", lead+1)
	stopProfile()

	// Failover after a SIGTERM: from the start of the active controller's
	// Close (which hands leadership over first) until a survivor takes a
	// write, while the old one may still be closing its stores.
	lead = q.leader()
	survivor = (lead + 1) % 3
	closing := q.nodes[lead]
	closed := make(chan error, 1)
	start = time.Now()
	phase("close of node %d, write through node %d", lead+1, survivor+1)
	go func() { closed <- closing.Close() }()
	q.applyOn(survivor, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
	closeFailover := time.Since(start)
	phase("written after the close")
	if err := <-closed; err != nil {
		b.Fatal(err)
	}
	q.nodes[lead] = nil

	b.ReportMetric(float64(total), "partitions")
	b.ReportMetric(create.Seconds(), "create_s")
	b.ReportMetric(snapTime.Seconds(), "snapshot_s")
	b.ReportMetric(float64(snapBytes), "snapshot_bytes")
	b.ReportMetric(shutdown.Seconds(), "controlled_shutdown_s")
	// The process's CPU time (three nodes' work): what a shared machine's
	// load does not inflate the way it inflates wall time.
	b.ReportMetric(shutdownCPU.Seconds(), "controlled_shutdown_cpu_s")
	// Of which the kernel's (page faults on fresh memory, the logs'
	// writes), and the minor page faults themselves.
	b.ReportMetric(time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano()).Seconds(), "controlled_shutdown_sys_s")
	b.ReportMetric(float64(ru1.Minflt-ru0.Minflt), "controlled_shutdown_faults")
	b.ReportMetric(failover.Seconds(), "failover_s")
	b.ReportMetric(float64(term1-term0), "elections_before_failover")
	b.ReportMetric(float64(failoverElections), "failover_elections")
	b.ReportMetric(float64(crashElections), "crash_elections")
	b.ReportMetric(closeTime.Seconds(), "close_s")
	b.ReportMetric(restart.Seconds(), "restart_s")
	b.ReportMetric(closeFailover.Seconds(), "close_failover_s")
}

// writeLogs writes each node's log to RUNNEL_BENCH_LOGS/node-N.log, and
// the benchmark's phases to phases.log, when that is set: what a slow
// phase's elections and moves were.
func writeLogs(b *testing.B, q *proxied, phases string) {
	dir := os.Getenv("RUNNEL_BENCH_LOGS")
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "phases.log"), []byte(phases), 0o644); err != nil {
		b.Error(err)
	}
	for i, l := range q.logs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)), []byte(l.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// maxTerm is the highest raft term among the running nodes.
func (q *proxied) maxTerm() uint64 {
	var t uint64
	for _, n := range q.nodes {
		if n != nil {
			t = max(t, n.Status().Term)
		}
	}
	return t
}

// usage is this process's resource usage so far.
type usage struct{ syscall.Rusage }

func rusage(b *testing.B) usage {
	var u usage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u.Rusage); err != nil {
		b.Fatal(err)
	}
	return u
}

// cpu is the CPU time (user and system) used.
func (u usage) cpu() time.Duration { return time.Duration(u.Utime.Nano() + u.Stime.Nano()) }

// startProfile starts a CPU profile into file (nothing when file is "")
// and returns what stops it.
func startProfile(b *testing.B, file string) func() {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
