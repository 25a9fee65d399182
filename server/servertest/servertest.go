// Package servertest starts real runnel processes for integration tests: the
// binary is built once per test process, each node gets free loopback ports
// and a temporary data directory, and every node is stopped when its test ends.
// It also holds the chaos scenarios' result line (chaos.go), which
// scripts/chaostable reads.
package servertest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/syncbuf"
	"github.com/runnel/runnel/internal/testport"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of a runnel binary built from this module's source,
// building it on first use. Set RUNNEL_BINARY to use a prebuilt one.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RUNNEL_BINARY"); p != "" {
		return p
	}
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "runnel-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "runnel")
		cmd := exec.Command("go", "build", "-ldflags", linkFlags(root), "-o", build.path, "./cmd/runnel")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/runnel: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("servertest: %v", build.err)
	}
	return build.path
}

// linkFlags stamps the commit as `make build` does (see the Makefile), so
// tests see what `runnel version` reports for a real build.
func linkFlags(root string) string {
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	if commit == "" {
		return ""
	}
	if git("status", "--porcelain", "--untracked-files=no") != "" {
		commit += "-dirty"
	}
	const pkg = "github.com/runnel/runnel/server."
	return "-X " + pkg + "linkVersion=" + git("describe", "--tags", "--always", "--dirty") + " -X " + pkg + "linkCommit=" + commit
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the runnel module")
	}
	return filepath.Dir(mod), nil
}

// FreeAddr returns a loopback address with a port free right now (see
// internal/testport for why ports come from below the ephemeral range).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return testport.FreeAddr(t)
}

// Options describe one node. Zero values pick fresh ports and a temp dir.
type Options struct {
	NodeID    int
	DataDir   string
	HTTPAddr  string
	KafkaAddr string // "-" disables the Kafka listener
	RaftAddr  string
	Args      []string // extra `runnel serve` flags
	Env       []string
}

// Node is a running (or stopped) runnel process.
type Node struct {
	t    testing.TB
	bin  string
	opts Options

	URL       string // http://host:port
	HTTPAddr  string
	KafkaAddr string
	RaftAddr  string
	DataDir   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
	done chan struct{}
}

// Start starts a node and waits until /readyz answers 200.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	n := New(t, opts)
	n.Start()
	return n
}

// New prepares a node without starting it.
func New(t testing.TB, opts Options) *Node {
	t.Helper()
	if opts.NodeID == 0 {
		opts.NodeID = 1
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = FreeAddr(t)
	}
	if opts.KafkaAddr == "" {
		opts.KafkaAddr = FreeAddr(t)
	}
	if opts.RaftAddr == "" {
		opts.RaftAddr = FreeAddr(t)
	}
	n := &Node{t: t, bin: Binary(t), opts: opts, URL: "http://" + opts.HTTPAddr,
		HTTPAddr: opts.HTTPAddr, RaftAddr: opts.RaftAddr, DataDir: opts.DataDir}
	if opts.KafkaAddr != "-" {
		n.KafkaAddr = opts.KafkaAddr
	}
	t.Cleanup(func() { n.Kill() })
	return n
}

// Args returns the `runnel serve` arguments of this node.
func (n *Node) Args() []string {
	kafka := n.opts.KafkaAddr
	if kafka == "-" {
		kafka = ""
	}
	args := []string{"serve",
		"--node-id", fmt.Sprint(n.opts.NodeID),
		"--data-dir", n.opts.DataDir,
		"--http-addr", n.opts.HTTPAddr,
		"--kafka-addr", kafka,
		"--raft-addr", n.opts.RaftAddr,
	}
	return append(args, n.opts.Args...)
}

// Start launches the process (again, after Stop or Kill) and waits for
// readiness, as long as a cluster's first start does (StartCluster): a
// restart after a kill -9 has more to do (recovery) than a first start.
func (n *Node) Start() {
	n.t.Helper()
	n.StartNoWait()
	n.WaitReady(60 * time.Second)
}

// StartNoWait launches the process without waiting for readiness.
func (n *Node) StartNoWait() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.t.Fatalf("servertest: node %d already running", n.opts.NodeID)
	}
	cmd := exec.Command(n.bin, n.Args()...)
	cmd.Env = append(os.Environ(), n.opts.Env...)
	if n.logs == nil {
		n.logs = &syncbuf.Buffer{}
	}
	cmd.Stdout = n.logs
	cmd.Stderr = n.logs
	cmd.SysProcAttr = ownProcessGroup()
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("servertest: start %s: %v", n.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
}

// WaitReady polls /readyz until it answers 200.
func (n *Node) WaitReady(timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n.exited() {
			n.t.Fatalf("servertest: node %d exited during start:\n%s", n.opts.NodeID, n.Logs())
		}
		resp, err := http.Get(n.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("servertest: node %d not ready after %v:\n%s", n.opts.NodeID, timeout, n.Logs())
}

func (n *Node) exited() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to stopWait for the process to exit.
func (n *Node) Stop() {
	n.t.Helper()
	n.signal(syscall.SIGTERM, stopWait)
}

// stopWait is how long Stop waits for an exit: more than the server's own
// bounds add up to (a controlled shutdown of up to half of
// --shutdown-timeout, 10 s by default, then up to the whole of it, 20 s,
// for HTTP requests in flight, then the controller's handover), so that
// only a hung exit fails a test, not a slow one on a loaded machine.
const stopWait = 60 * time.Second

// StopWithin sends SIGTERM and waits up to wait for the process to exit (a
// benchmark that times an exit longer than Stop's stopWait).
func (n *Node) StopWithin(wait time.Duration) {
	n.t.Helper()
	n.signal(syscall.SIGTERM, wait)
}

// Kill sends SIGKILL and waits for the process to exit.
func (n *Node) Kill() { n.signal(syscall.SIGKILL, 10*time.Second) }

func (n *Node) signal(sig syscall.Signal, wait time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		n.t.Errorf("servertest: node %d did not exit within %v of %v", n.opts.NodeID, wait, sig)
	}
}

// WaitExit waits up to timeout for the process to exit by itself and
// returns its exit code; exited is false when it still runs (it is left
// running).
func (n *Node) WaitExit(timeout time.Duration) (code int, exited bool) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		n.t.Fatalf("servertest: node %d is not running", n.opts.NodeID)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return 0, false
	}
	n.mu.Lock()
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
	return cmd.ProcessState.ExitCode(), true
}

// Logs returns everything the process wrote so far.
func (n *Node) Logs() string {
	if n.logs == nil {
		return ""
	}
	return n.logs.String()
}

// WaitFor polls cond until it is true or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("servertest: timed out after %v waiting for %s", timeout, what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID returns the running process's id, or 0 when the node is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Signal sends sig to the running process (e.g. SIGSTOP / SIGCONT to pause a
// node). For SIGSTOP it returns once every thread of the process has
// stopped: kill(2) only queues the stop, and the kernel spreads it to the
// other threads when the first one handles it, so on a loaded machine a
// paused node used to answer a fetch or two after Signal returned (a test
// then saw a "paused" follower acknowledge a write).
func (n *Node) Signal(sig syscall.Signal) {
	n.t.Helper()
	pid := n.PID()
	if pid == 0 {
		n.t.Fatalf("servertest: node %d is not running", n.opts.NodeID)
	}
	if err := sendSignal(pid, sig); err != nil {
		n.t.Fatalf("servertest: signal node %d: %v", n.opts.NodeID, err)
	}
	if sig != sigStop {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !allThreadsStopped(pid) {
		if time.Now().After(deadline) {
			n.t.Fatalf("servertest: node %d not stopped 10 s after SIGSTOP", n.opts.NodeID)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of pid is in the stopped
// state (T in /proc/PID/task/TID/stat).
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// "pid (comm) S ...": the state follows the last ')' (comm may hold one).
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

// RSS returns the process's current and peak resident set size in bytes, as
// the kernel measures them (/proc/PID/status VmRSS and VmHWM). Memory limits
// are asserted on these, never guessed.
func (n *Node) RSS() (current, peak int64) {
	n.t.Helper()
	pid := n.PID()
	if pid == 0 {
		n.t.Fatalf("servertest: node %d is not running", n.opts.NodeID)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		n.t.Fatalf("servertest: read status of node %d: %v", n.opts.NodeID, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			current = kb << 10
		} else if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			peak = kb << 10
		}
	}
	return current, peak
}
