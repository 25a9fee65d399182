package leaderwatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRank(t *testing.T) {
	voters := []Voter{{"10", 5}, {"3", 5}, {"2", 5}}
	for self, want := range map[string]int{"2": 0, "3": 1, "10": 2, "7": -1} {
		if got := Rank(voters, self); got != want {
			t.Errorf("Rank(%v, %s) = %d, want %d", voters, self, got, want)
		}
	}
	// The longest log first: it is the one the others vote for.
	voters = []Voter{{"2", 5}, {"3", 6}, {"4", 1}}
	for self, want := range map[string]int{"3": 0, "2": 1, "4": 2} {
		if got := Rank(voters, self); got != want {
			t.Errorf("Rank(%v, %s) = %d, want %d", voters, self, got, want)
		}
	}
}

// closedAddr is a loopback address that refuses connections: a socket
// bound to it that does not listen, held until the test ends (a port
// merely closed could be handed to the next listener).
func closedAddr(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// server listens and runs handle on each accepted connection.
func server(t *testing.T, handle func(*net.TCPConn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c.(*net.TCPConn))
		}
	}()
	return ln.Addr().String()
}

// A port that refuses, or resets what it accepted (a listener closing
// with the connection queued), is a dead process; one that accepts and
// stays open, or closes in order, is not.
func TestDeadProbe(t *testing.T) {
	w := New(Config{ProbeWait: 300 * time.Millisecond})
	ctx := context.Background()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	cases := map[string]struct {
		addr string
		dead bool
	}{
		"refused": {closedAddr(t), true},
		"reset": {server(t, func(c *net.TCPConn) {
			_ = c.SetLinger(0)
			c.Close()
		}), true},
		"open":   {server(t, func(c *net.TCPConn) { held = append(held, c) }), false},
		"closed": {server(t, func(c *net.TCPConn) { c.Close() }), false},
	}
	for name, c := range cases {
		if got := w.dead(ctx, c.addr); got != c.dead {
			t.Errorf("%s: dead = %v, want %v", name, got, c.dead)
		}
	}
}

// fake is a raft node for the watch: its view and what it was asked.
type fake struct {
	mu     sync.Mutex
	view   View
	last   map[string]uint64 // the others' last indexes; missing: no answer
	views  int
	after  func(f *fake) // called on each View, after the first
	dials  int
	stands int
}

func (f *fake) config(addr string) Config {
	return Config{
		View: func() View {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.views++
			if f.views > 1 && f.after != nil {
				f.after(f)
			}
			return f.view
		},
		Addr: func(string) (string, error) { return addr, nil },
		LastIndex: func(_ context.Context, id string) (uint64, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if i, ok := f.last[id]; ok {
				return i, nil
			}
			return 0, errors.New("no answer")
		},
		Stand: func(context.Context) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stands++
			return nil
		},
		Quiet: 20 * time.Millisecond,
		Dial: func(ctx context.Context, a string) (net.Conn, error) {
			f.mu.Lock()
			f.dials++
			f.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a)
		},
	}
}

func voterView(self string) View {
	return View{Self: self, Leader: "1", Term: 7, Follower: true, Voters: []string{"1", "2", "3"}}
}

func withIndex(v View, i uint64) View {
	v.LastIndex = i
	return v
}

func recent(v View) View {
	v.LastContact = time.Now()
	return v
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	dead := closedAddr(t)
	cases := []struct {
		name         string
		view         View
		addr         string
		peer         string
		after        func(*fake)
		last         map[string]uint64
		dials, stand int
	}{
		{name: "first voter stands at once", view: voterView("2"), addr: dead, last: map[string]uint64{"3": 0}, dials: 1, stand: 1},
		{name: "the leader's own connection", view: voterView("2"), addr: dead, peer: "1", dials: 1, stand: 1},
		{name: "a lower id that answers stands, not this one", view: voterView("3"), addr: dead,
			last: map[string]uint64{"2": 0}, dials: 1},
		{name: "a lower id that does not answer is left out", view: voterView("3"), addr: dead, dials: 1, stand: 1},
		{name: "a leader was elected meanwhile", view: voterView("2"), addr: dead, dials: 1,
			after: func(f *fake) { f.view.Leader = "3" }},
		{name: "someone stood meanwhile", view: voterView("2"), addr: dead, dials: 1,
			after: func(f *fake) { f.view.Term++ }},
		{name: "a candidate meanwhile", view: voterView("2"), addr: dead, dials: 1,
			after: func(f *fake) { f.view.Follower = false }},
		{name: "the other's log is longer: it stands", view: voterView("2"), addr: dead, dials: 1,
			last: map[string]uint64{"3": 9}},
		{name: "this log is longer", view: withIndex(voterView("3"), 9), addr: dead, dials: 1, stand: 1,
			last: map[string]uint64{"2": 8}},
		{name: "heard from recently, then silent", view: recent(voterView("2")), addr: dead, dials: 1, stand: 1},
		{name: "port refuses, leader still heard from", view: recent(voterView("2")), addr: dead, dials: 1,
			after: func(f *fake) { f.view.LastContact = time.Now() }},
		{name: "leader alive", view: voterView("2"), addr: server(t, func(c *net.TCPConn) { c.Close() }), dials: 1},
		{name: "another peer's connection", view: voterView("2"), addr: dead, peer: "3"},
		{name: "non-voter", view: View{Self: "4", Leader: "1", Term: 7, Follower: true, Voters: []string{"1", "2", "3"}}, addr: dead},
		{name: "no leader", view: View{Self: "2", Term: 7, Follower: true, Voters: []string{"1", "2", "3"}}, addr: dead},
		{name: "leader itself", view: View{Self: "1", Leader: "1", Term: 7, Voters: []string{"1", "2", "3"}}, addr: dead},
	}
	for _, c := range cases {
		f := &fake{view: c.view, after: c.after, last: c.last}
		w := New(f.config(c.addr))
		w.check(ctx, c.peer)
		if f.dials != c.dials || f.stands != c.stand || w.Stands() != uint64(c.stand) {
			t.Errorf("%s: %d probes, stood %d times (counted %d); want %d, %d", c.name, f.dials, f.stands, w.Stands(), c.dials, c.stand)
		}
	}
}

// Run handles a kick and returns when its context ends; kicks never block.
func TestRunKick(t *testing.T) {
	f := &fake{view: voterView("2")}
	w := New(f.config(closedAddr(t)))
	for range 5 {
		w.Kick("3")
	}
	w.Kick("")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	for w.Stands() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if w.Stands() != 1 {
		t.Fatalf("stood %d times after coalesced kicks, want 1", w.Stands())
	}
}
