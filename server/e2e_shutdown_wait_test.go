package server_test

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// A stop whose HTTP step waits more than its grace says, each second, what
// it waits for: here a connection that sent half a request's header (a
// "new" connection, which the server's stop waits for until it is 5 s
// old). Issue 19: the HTTP step of a 300,000-partition node's exit took
// 3.4 s, and nothing named what for.
func TestStopNamesTheHTTPConnectionsItWaitsFor(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := sendPart(t, n, "GET /v1/topics HTTP/1.1\r\nHost: localhost\r\n")
	n.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(n.Logs(), "http server closing: waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the HTTP step's wait in 20 s:\n%s", n.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var wait string
	for line := range strings.Lines(n.Logs()) {
		if strings.Contains(line, "http server closing: waiting") {
			wait = line
			break
		}
	}
	if !strings.Contains(wait, "connections=\"new: 1 (oldest ") {
		t.Errorf("the wait's log does not name the half-read connection: %s", wait)
	}
	c.Close()
	if _, exited := n.WaitExit(20 * time.Second); !exited {
		t.Fatalf("the node did not exit once the connection closed:\n%s", n.Logs())
	}
	if !strings.Contains(n.Logs(), "http server closed") {
		t.Errorf("no log of the wait's end:\n%s", n.Logs())
	}
}

// A client that sends half a request's body does not hold a stopping
// node's exit: the read of the body ends with the grace that ends the
// requests' contexts. It held it for the whole shutdown timeout (20 s);
// the bound here is half that.
func TestStopCutsAHalfSentBody(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	sendPart(t, n, "POST /v1/topics HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"+`{"name":`)
	n.Signal(syscall.SIGTERM)
	if _, exited := n.WaitExit(10 * time.Second); !exited {
		t.Fatalf("a half-sent body held the stop 10 s:\n%s", n.Logs())
	}
}

// sendPart sends n's HTTP port the first part of a request and gives the
// server 200 ms to read it; the connection closes with the test.
func sendPart(t *testing.T, n *servertest.Node, part string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(part)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // read by the server (a handler reading the body, for one with a body)
	return c
}
