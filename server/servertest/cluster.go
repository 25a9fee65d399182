package servertest

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// ClusterOptions describe a multi-process cluster on loopback. Node ids are
// 1..n: controllers (or combined nodes) first, then dedicated brokers.
type ClusterOptions struct {
	Combined    int // nodes with --roles controller,broker
	Controllers int // dedicated controllers
	Brokers     int // dedicated brokers
	// Proxied routes every controller-to-controller connection through a
	// TCP proxy per (from, to) pair, so a test can cut a node off.
	Proxied bool
	Args    []string // extra flags for every node
	// NodeArgs, when set, adds flags for one node (e.g. its certificate).
	NodeArgs func(id int) []string
}

// Cluster is a set of nodes sharing one controller quorum.
type Cluster struct {
	t       testing.TB
	Nodes   []*Node           // index i holds node id i+1
	proxies map[[2]int]*Proxy // (from id, to id) -> proxy
}

// StartCluster starts every node and waits until all are ready.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c := NewCluster(t, opts)
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	for _, n := range c.Nodes {
		n.WaitReady(60 * time.Second)
	}
	return c
}

// NewCluster prepares the nodes without starting them.
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t, proxies: map[[2]int]*Proxy{}}
	voters := opts.Combined + opts.Controllers
	total := voters + opts.Brokers
	raftAddrs := make([]string, total+1)
	for id := 1; id <= total; id++ {
		raftAddrs[id] = FreeAddr(t)
	}
	for id := 1; id <= total; id++ {
		var ctrls []string
		for v := 1; v <= voters; v++ {
			addr := raftAddrs[v]
			if opts.Proxied && v != id {
				p := NewProxy(t, raftAddrs[v])
				c.proxies[[2]int{id, v}] = p
				addr = p.Addr()
			}
			ctrls = append(ctrls, fmt.Sprintf("%d@%s", v, addr))
		}
		roles := "controller,broker"
		switch {
		case id > voters:
			roles = "broker"
		case id > opts.Combined:
			roles = "controller"
		}
		args := append([]string{"--roles", roles, "--controllers", strings.Join(ctrls, ",")}, opts.Args...)
		if opts.NodeArgs != nil {
			args = append(args, opts.NodeArgs(id)...)
		}
		c.Nodes = append(c.Nodes, New(t, Options{NodeID: id, RaftAddr: raftAddrs[id], Args: args}))
	}
	return c
}

// Node returns the node with the given id.
func (c *Cluster) Node(id int) *Node { return c.Nodes[id-1] }

// Isolate cuts every proxied connection to and from node id.
func (c *Cluster) Isolate(id int) { c.setCut(id, true) }

// Heal restores the connections Isolate cut.
func (c *Cluster) Heal(id int) { c.setCut(id, false) }

func (c *Cluster) setCut(id int, cut bool) {
	if len(c.proxies) == 0 {
		c.t.Fatalf("servertest: cluster not started with Proxied")
	}
	for pair, p := range c.proxies {
		if pair[0] == id || pair[1] == id {
			p.SetCut(cut)
		}
	}
}

// Proxy forwards TCP connections to a target and can cut them.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool              // guarded by mu
	conns map[net.Conn]bool // guarded by mu
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port; it stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("servertest: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetCut drops all current connections and refuses new ones (true), or
// lets traffic through again (false).
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SetCut(true)
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.mu.Unlock()
		out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
