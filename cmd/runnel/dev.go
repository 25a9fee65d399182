package main

// `runnel dev cluster`: a local multi-node cluster as child processes of this
// binary, for trying replication and failover on one machine without Docker.
//
// Layout: <data-dir>/cluster.json holds the nodes and their ports (so a
// restart on the same directory brings the same cluster back),
// <data-dir>/node-<id>/ is each node's --data-dir and, unless --logs stdout,
// <data-dir>/logs/node-<id>.log its output.
//
// Goroutines: one per child, started by exec.Cmd.Start and owned by
// devProc.wait, which reaps the child and reports its exit on the cluster's
// exits channel; devCluster.stop waits for all of them before returning.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

const (
	devLayoutFile   = "cluster.json"
	devCombined     = "combined"
	devDedicated    = "dedicated"
	devLogsFiles    = "files"
	devLogsStdout   = "stdout"
	devControllers  = 3 // controllers of a dedicated layout
	devPortsPerNode = 3 // HTTP, Kafka, Raft
)

var (
	errDevLayout   = errors.New("dev cluster: data dir holds a different cluster")
	errDevExited   = errors.New("dev cluster: a node exited unexpectedly")
	errDevNotReady = errors.New("dev cluster: nodes not ready")
	errDevPortUsed = errors.New("dev cluster: port in use")
)

// devFlags are the `runnel dev cluster` flags.
type devFlags struct {
	nodes        int
	dataDir      string
	basePort     int
	roles        string
	logs         string
	readyTimeout time.Duration
	stopTimeout  time.Duration
}

// devNode is one node of the local cluster as stored in cluster.json.
type devNode struct {
	ID        int32  `json:"id"`
	Roles     string `json:"roles"`
	HTTPAddr  string `json:"http_addr"`
	KafkaAddr string `json:"kafka_addr,omitempty"` // empty: controller only
	RaftAddr  string `json:"raft_addr"`
}

// devLayout is the whole cluster as stored in cluster.json.
type devLayout struct {
	Layout  string    `json:"layout"`  // combined or dedicated
	Brokers int       `json:"brokers"` // the -n it was created with
	Nodes   []devNode `json:"nodes"`
}

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Tools for running runnel locally",
		Args:  cobra.NoArgs,
	}
	dev.AddCommand(newDevClusterCommand())
	return dev
}

func newDevClusterCommand() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "cluster [-- serve flags...]",
		Short: "Start a local multi-node cluster as child processes (no Docker)",
		Long: "Start a local cluster: N combined nodes (controller and broker), or with\n" +
			"--roles dedicated 3 controllers plus N brokers, each a `runnel serve` child\n" +
			"process on loopback ports, under one data directory. Prints the node table and\n" +
			"the addresses to paste into clients once every node is ready; Ctrl-C stops all\n" +
			"nodes with a controlled shutdown. Run it again on the same --data-dir to bring\n" +
			"the same cluster (same ids and ports) back. Flags after -- go to every node.",
		Example: "  runnel dev cluster -n 3\n" +
			"  runnel dev cluster -n 3 --roles dedicated --base-port 19000 --logs stdout\n" +
			"  runnel dev cluster -- --log-level debug",
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) > 0 && dash != 0 {
				return fmt.Errorf("unexpected argument %q (serve flags go after --)", args[0])
			}
			cmd.SilenceUsage = true
			return runDevCluster(cmd, f, args)
		},
	}
	fs := cmd.Flags()
	fs.IntVarP(&f.nodes, "nodes", "n", 3, "number of nodes (with --roles dedicated: brokers, besides 3 controllers)")
	fs.StringVar(&f.dataDir, "data-dir", "./dev-data", "directory holding every node's data, logs and cluster.json")
	fs.IntVar(&f.basePort, "base-port", 0, "first port: node i uses base+3(i-1) for HTTP, +1 Kafka, +2 Raft (default: free ports)")
	fs.StringVar(&f.roles, "roles", devCombined, "combined (every node controller and broker) or dedicated (3 controllers + N brokers)")
	fs.StringVar(&f.logs, "logs", devLogsFiles, "node output: files (<data-dir>/logs/node-<id>.log) or stdout (prefixed with the node id)")
	fs.DurationVar(&f.readyTimeout, "ready-timeout", 90*time.Second, "how long to wait for every node's /readyz")
	fs.DurationVar(&f.stopTimeout, "stop-timeout", 60*time.Second, "how long to wait for the nodes to stop before killing them")
	return cmd
}

// runDevCluster starts the cluster, waits for a signal or a dead node, and
// stops every node.
func runDevCluster(cmd *cobra.Command, f devFlags, serveArgs []string) error {
	if f.logs != devLogsFiles && f.logs != devLogsStdout {
		return fmt.Errorf("--logs: %q is not files or stdout", f.logs)
	}
	layout, err := loadOrPlanLayout(cmd, f)
	if err != nil {
		return err
	}
	if err := checkPortsFree(layout); err != nil {
		return err
	}
	// Nodes talk to each other over mutual TLS, as a real cluster should:
	// a CA and node certificates in <data-dir>/certs, made once and reused.
	maxID := 0
	for _, n := range layout.Nodes {
		maxID = max(maxID, int(n.ID))
	}
	if err := createCerts(io.Discard, filepath.Join(f.dataDir, devCertsDir), maxID, nil, 10*365*24*time.Hour, false); err != nil {
		return fmt.Errorf("dev cluster: inter-node certificates: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("dev cluster: find own binary: %w", err)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// The nodes have their own process groups, so a closed terminal must
	// stop them through us too.
	ctx, stopHangup := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stopHangup()
	c := &devCluster{bin: self, dir: f.dataDir, logs: f.logs, errOut: cmd.ErrOrStderr(), logOut: cmd.OutOrStdout(),
		exits: make(chan *devProc, len(layout.Nodes))}
	err = c.run(ctx, cmd.OutOrStdout(), f, layout, serveArgs)
	if stopErr := c.stop(f.stopTimeout); err == nil {
		err = stopErr
	}
	return err
}

// run starts the nodes and returns when ctx is done (nil) or a node fails.
func (c *devCluster) run(ctx context.Context, out io.Writer, f devFlags, l devLayout, serveArgs []string) error {
	fmt.Fprintf(c.errOut, "starting %d nodes under %s ...\n", len(l.Nodes), f.dataDir)
	if err := c.start(l, serveArgs); err != nil {
		return err
	}
	if err := c.waitReady(ctx, f.readyTimeout); err != nil || ctx.Err() != nil {
		return err
	}
	// Built whole, then written under the lock the node log lines take
	// (--logs stdout shares stdout), so no log line lands inside the table.
	var summary bytes.Buffer
	if err := writeDevSummary(&summary, f, c); err != nil {
		return err
	}
	c.outMu.Lock()
	_, err := out.Write(summary.Bytes())
	c.outMu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-c.exits:
		if ctx.Err() != nil {
			return nil // stopping anyway
		}
		c.reportExit(p)
		return fmt.Errorf("%w: node %d (%v)", errDevExited, p.node.ID, p.err)
	}
}

// loadOrPlanLayout reads <data-dir>/cluster.json, or plans a new cluster and
// writes it there. Flags given explicitly must agree with a stored layout.
func loadOrPlanLayout(cmd *cobra.Command, f devFlags) (devLayout, error) {
	if f.roles != devCombined && f.roles != devDedicated {
		return devLayout{}, fmt.Errorf("--roles: %q is not combined or dedicated", f.roles)
	}
	if f.nodes < 1 {
		return devLayout{}, fmt.Errorf("-n: need at least one node, not %d", f.nodes)
	}
	path := filepath.Join(f.dataDir, devLayoutFile)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		var l devLayout
		if err := json.Unmarshal(raw, &l); err != nil || len(l.Nodes) == 0 {
			return devLayout{}, fmt.Errorf("dev cluster: %s is not a cluster layout (%v); remove it or use another --data-dir", path, err)
		}
		return l, l.agrees(cmd, f)
	case !errors.Is(err, os.ErrNotExist):
		return devLayout{}, fmt.Errorf("dev cluster: read layout: %w", err)
	}
	l, err := planLayout(f)
	if err != nil {
		return devLayout{}, err
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return devLayout{}, fmt.Errorf("dev cluster: create data dir: %w", err)
	}
	raw, err = json.MarshalIndent(l, "", "  ")
	if err != nil {
		return devLayout{}, fmt.Errorf("dev cluster: encode layout: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return devLayout{}, fmt.Errorf("dev cluster: write layout: %w", err)
	}
	return l, nil
}

// agrees reports an error when a flag given on the command line asks for a
// cluster other than the stored one.
func (l devLayout) agrees(cmd *cobra.Command, f devFlags) error {
	fs := cmd.Flags()
	mismatch := func(what string) error {
		return fmt.Errorf("%w: %s has %d brokers, layout %s; %s differs (drop the flag or use another --data-dir)",
			errDevLayout, filepath.Join(f.dataDir, devLayoutFile), l.Brokers, l.Layout, what)
	}
	if fs.Changed("nodes") && f.nodes != l.Brokers {
		return mismatch("-n")
	}
	if fs.Changed("roles") && f.roles != l.Layout {
		return mismatch("--roles")
	}
	if fs.Changed("base-port") && f.basePort != 0 && l.Nodes[0].HTTPAddr != loopback(f.basePort) {
		return mismatch("--base-port")
	}
	return nil
}

// planLayout assigns ids, roles and ports: controllers (or combined nodes)
// first, then dedicated brokers.
func planLayout(f devFlags) (devLayout, error) {
	l := devLayout{Layout: f.roles, Brokers: f.nodes}
	total := f.nodes
	if f.roles == devDedicated {
		total += devControllers
	}
	ports, err := devPorts(total*devPortsPerNode, f.basePort)
	if err != nil {
		return l, err
	}
	for i := range total {
		n := devNode{ID: int32(i + 1), Roles: "controller,broker",
			HTTPAddr: ports[devPortsPerNode*i], KafkaAddr: ports[devPortsPerNode*i+1], RaftAddr: ports[devPortsPerNode*i+2]}
		if f.roles == devDedicated {
			n.Roles = "broker"
			if i < devControllers {
				n.Roles, n.KafkaAddr = "controller", ""
			}
		}
		l.Nodes = append(l.Nodes, n)
	}
	return l, nil
}

// devPorts returns count loopback addresses: consecutive from base, or free
// ports picked by the kernel (all held open together, so they differ).
func devPorts(count, base int) ([]string, error) {
	addrs := make([]string, 0, count)
	if base != 0 {
		if base < 1 || base+count-1 > 65535 {
			return nil, fmt.Errorf("--base-port: %d..%d is not a port range", base, base+count-1)
		}
		for i := range count {
			addrs = append(addrs, loopback(base+i))
		}
		return addrs, nil
	}
	for range count {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("dev cluster: pick a free port: %w", err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// checkPortsFree fails early, with the node and port named, when a port the
// layout needs is taken (another dev cluster on the same data dir, say).
func checkPortsFree(l devLayout) error {
	for _, n := range l.Nodes {
		for _, p := range [][2]string{{"HTTP", n.HTTPAddr}, {"Kafka", n.KafkaAddr}, {"Raft", n.RaftAddr}} {
			if p[1] == "" {
				continue
			}
			ln, err := net.Listen("tcp", p[1])
			if err != nil {
				return fmt.Errorf("%w: node %d's %s address %s (another dev cluster on this data dir?): %v",
					errDevPortUsed, n.ID, p[0], p[1], err)
			}
			ln.Close()
		}
	}
	return nil
}

// controllers is the --controllers value every node gets.
func (l devLayout) controllers() string {
	var parts []string
	for _, n := range l.Nodes {
		if strings.Contains(n.Roles, "controller") {
			parts = append(parts, fmt.Sprintf("%d@%s", n.ID, n.RaftAddr))
		}
	}
	return strings.Join(parts, ",")
}

// devCertsDir holds the dev cluster's CA and node certificates, under its
// data dir.
const devCertsDir = "certs"

// serveArgs are the `runnel serve` arguments of node n.
func (l devLayout) serveArgs(dir string, n devNode, extra []string) []string {
	args := []string{"serve",
		"--node-id", strconv.Itoa(int(n.ID)),
		"--roles", n.Roles,
		"--controllers", l.controllers(),
		"--data-dir", filepath.Join(dir, fmt.Sprintf("node-%d", n.ID)),
		"--http-addr", n.HTTPAddr,
		"--kafka-addr", n.KafkaAddr,
		"--raft-addr", n.RaftAddr,
		"--cluster-ca-file", filepath.Join(dir, devCertsDir, "ca.pem"),
		"--node-cert-file", filepath.Join(dir, devCertsDir, fmt.Sprintf("node-%d.pem", n.ID)),
		"--node-key-file", filepath.Join(dir, devCertsDir, fmt.Sprintf("node-%d-key.pem", n.ID)),
	}
	return append(args, extra...)
}

// devCluster is the set of running child processes.
type devCluster struct {
	bin    string
	dir    string
	logs   string
	errOut io.Writer // the command's own messages
	logOut io.Writer // node output with --logs stdout
	procs  []*devProc
	exits  chan *devProc // each child's exit, in the order they happen

	outMu sync.Mutex // serialises prefixed lines on logOut (--logs stdout)
}

// devProc is one child process.
type devProc struct {
	node    devNode
	cmd     *exec.Cmd
	logPath string   // --logs files
	logFile *os.File // closed once the child is reaped
	done    chan struct{}
	err     error // the exit, valid once done is closed
}

// start launches every node without waiting for any.
func (c *devCluster) start(l devLayout, extra []string) error {
	if c.logs == devLogsFiles {
		if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o700); err != nil {
			return fmt.Errorf("dev cluster: create log dir: %w", err)
		}
	}
	for _, n := range l.Nodes {
		p := &devProc{node: n, done: make(chan struct{})}
		p.cmd = exec.Command(c.bin, l.serveArgs(c.dir, n, extra)...)
		// Own process group: Ctrl-C reaches only this process, which then
		// stops the nodes in order (brokers before controllers).
		p.cmd.SysProcAttr = ownProcessGroup()
		if err := c.attachOutput(p); err != nil {
			return err
		}
		if err := p.cmd.Start(); err != nil {
			p.closeLog()
			return fmt.Errorf("dev cluster: start node %d: %w", n.ID, err)
		}
		c.procs = append(c.procs, p)
		go p.wait(c.exits)
	}
	return nil
}

// attachOutput sends the child's stdout and stderr to its log file or, with
// --logs stdout, to stdout one prefixed line at a time.
func (c *devCluster) attachOutput(p *devProc) error {
	if c.logs == devLogsStdout {
		w := &prefixWriter{prefix: fmt.Sprintf("node-%d | ", p.node.ID), mu: &c.outMu, dst: c.logOut}
		p.cmd.Stdout, p.cmd.Stderr = w, w
		return nil
	}
	p.logPath = filepath.Join(c.dir, "logs", fmt.Sprintf("node-%d.log", p.node.ID))
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("dev cluster: open node %d log: %w", p.node.ID, err)
	}
	p.logFile = f
	p.cmd.Stdout, p.cmd.Stderr = f, f
	return nil
}

// wait reaps the child and reports it on exits (buffered for every child).
func (p *devProc) wait(exits chan<- *devProc) {
	p.err = p.cmd.Wait()
	if w, ok := p.cmd.Stdout.(*prefixWriter); ok {
		w.flush()
	}
	p.closeLog()
	close(p.done)
	exits <- p
}

func (p *devProc) closeLog() {
	if p.logFile != nil {
		p.logFile.Close()
	}
}

func (p *devProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls every node's /readyz until all answer 200. It returns nil
// early when ctx is done (the caller then stops the nodes).
func (c *devCluster) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	pending := append([]*devProc(nil), c.procs...)
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case p := <-c.exits:
			c.reportExit(p)
			return fmt.Errorf("%w: node %d exited during start (%v)", errDevExited, p.node.ID, p.err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v: node %d has not answered /readyz (see its log)", errDevNotReady, timeout, pending[0].node.ID)
		}
		pending = notReady(client, pending)
	}
	return nil
}

func notReady(client *http.Client, procs []*devProc) []*devProc {
	var rest []*devProc
	for _, p := range procs {
		resp, err := client.Get("http://" + p.node.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				continue
			}
		}
		rest = append(rest, p)
	}
	return rest
}

// reportExit says which node died and, when its output went to a file,
// shows the end of it.
func (c *devCluster) reportExit(p *devProc) {
	fmt.Fprintf(c.errOut, "node %d exited unexpectedly (%v); stopping the others\n", p.node.ID, p.err)
	if p.logPath == "" {
		return
	}
	raw, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	fmt.Fprintf(c.errOut, "last lines of %s:\n", p.logPath)
	for _, line := range lines[max(0, len(lines)-15):] {
		fmt.Fprintf(c.errOut, "  node-%d | %s\n", p.node.ID, line)
	}
}

// stop sends SIGTERM to every running node (a controlled shutdown), waits up
// to timeout, then kills what is left. Dedicated brokers stop first,
// together, while the controllers can still move their leaderships away;
// then the controllers (or combined nodes) one at a time, the Raft leader
// last: each one's controlled shutdown finds the quorum and its leader, no
// election runs, and the last one has no other broker to hand over to, so
// none waits for a deadline. It always waits for every child.
func (c *devCluster) stop(timeout time.Duration) error {
	var brokers, rest []*devProc
	running := 0
	for _, p := range c.procs {
		if !p.exited() {
			running++
		}
		if strings.Contains(p.node.Roles, "controller") {
			rest = append(rest, p)
		} else {
			brokers = append(brokers, p)
		}
	}
	if running == 0 {
		return nil
	}
	fmt.Fprintf(c.errOut, "stopping %d nodes (Ctrl-C again kills them) ...\n", running)
	start := time.Now()
	// A second Ctrl-C or SIGTERM ends the wait at once, as the timeout does.
	again, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	ctx, cancel := context.WithTimeout(again, timeout)
	defer cancel()
	killed := stopStage(ctx, brokers)
	for _, p := range leaderLast(rest) {
		killed = append(killed, stopStage(ctx, []*devProc{p})...)
	}
	if len(killed) > 0 {
		return fmt.Errorf("dev cluster: node(s) %s killed before they stopped (after %v or a second signal)", strings.Join(killed, ","), time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(c.errOut, "all nodes stopped in %v\n", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// leaderLast orders procs with the node that leads the Raft quorum (as the
// first node to answer GET /v1/cluster says) at the end.
func leaderLast(procs []*devProc) []*devProc {
	client := &http.Client{Timeout: time.Second}
	leader := int32(-1)
	for _, p := range procs {
		if p.exited() {
			continue
		}
		resp, err := client.Get("http://" + p.node.HTTPAddr + "/v1/cluster")
		if err != nil {
			continue
		}
		var cl struct {
			LeaderID int32 `json:"leader_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&cl)
		resp.Body.Close()
		if err == nil {
			leader = cl.LeaderID
			break
		}
	}
	out := make([]*devProc, 0, len(procs))
	var last []*devProc
	for _, p := range procs {
		if p.node.ID == leader {
			last = append(last, p)
		} else {
			out = append(out, p)
		}
	}
	return append(out, last...)
}

// stopStage sends SIGTERM to procs and waits for them, killing those still
// running once ctx is done. It returns the ids of the killed nodes.
func stopStage(ctx context.Context, procs []*devProc) []string {
	for _, p := range procs {
		if !p.exited() {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				_ = p.cmd.Process.Kill()
			}
		}
	}
	var killed []string
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		case <-ctx.Done():
		}
		killed = append(killed, strconv.Itoa(int(p.node.ID)))
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return killed
}

// writeDevSummary prints the node table and what to paste into clients.
func writeDevSummary(w io.Writer, f devFlags, c *devCluster) error {
	t := newTable(w, "NODE", "ROLES", "HTTP", "KAFKA", "RAFT", "PID")
	var firstHTTP string
	var kafka []string
	for _, p := range c.procs {
		n := p.node
		if firstHTTP == "" && strings.Contains(n.Roles, "broker") {
			firstHTTP = "http://" + n.HTTPAddr
		}
		if n.KafkaAddr != "" {
			kafka = append(kafka, n.KafkaAddr)
		}
		t.row(strconv.Itoa(int(n.ID)), n.Roles, "http://"+n.HTTPAddr, orDash(n.KafkaAddr), n.RaftAddr,
			strconv.Itoa(p.cmd.Process.Pid))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "runnel CLI:     runnel --server %s cluster\n", firstHTTP)
	fmt.Fprintf(w, "Kafka clients:  -b %s\n", strings.Join(kafka, ","))
	fmt.Fprintf(w, "Web UI:         %s/ui/\n", firstHTTP)
	if f.logs == devLogsFiles {
		fmt.Fprintf(w, "Logs:           %s (--logs stdout to stream them here)\n", filepath.Join(f.dataDir, "logs"))
	}
	fmt.Fprintf(w, "Layout:         %s (the same ports on restart)\n", filepath.Join(f.dataDir, devLayoutFile))
	fmt.Fprintf(w, "Inter-node TLS: %s (CA and node certificates)\n", filepath.Join(f.dataDir, devCertsDir))
	_, err := fmt.Fprintln(w, "Cluster ready. Ctrl-C stops every node.")
	return err
}

// prefixWriter writes whole lines to dst, each behind prefix, holding a
// partial line until its end arrives. exec.Cmd calls Write from one
// goroutine at a time for a writer used as both Stdout and Stderr; mu
// serialises lines of different nodes.
type prefixWriter struct {
	prefix string
	mu     *sync.Mutex
	dst    io.Writer
	buf    bytes.Buffer
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf.Next(i + 1)
		w.mu.Lock()
		_, err := io.WriteString(w.dst, w.prefix+string(line))
		w.mu.Unlock()
		if err != nil {
			return len(p), err
		}
	}
}

// flush writes a last line that had no newline.
func (w *prefixWriter) flush() {
	if w.buf.Len() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.dst, "%s%s\n", w.prefix, w.buf.Bytes())
	w.buf.Reset()
}
