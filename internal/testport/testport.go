// Package testport hands tests loopback ports that stay free until they are
// listened on.
//
// Asking the kernel for port 0 and closing the listener races with every
// outgoing connection on the machine: the kernel hands the same ephemeral
// port to the next connect, and the node that was meant to listen on it fails
// with "address already in use" (seen in raftfsm's cluster tests on a busy
// machine). Ports here come from below the kernel's ephemeral range (32768
// and up on Linux), which outgoing connections never take, and one test
// process never hands a port out twice.
//
// Test processes run in parallel (go test runs packages side by side), and
// between a port's check and its node's listen another process could hand
// out the same port. So a port handed out is also claimed across processes:
// an exclusive flock(2) on a file named after it in a directory shared by
// all test processes, held until the process exits (the kernel drops it
// then, even after kill -9). Where flock is missing only the check is done.
package testport

import (
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
)

const (
	low  = 20000
	high = 32000 // below net.ipv4.ip_local_port_range's default start, 32768
)

var ports struct {
	mu   sync.Mutex
	used map[int]bool
	next int
}

// FreeAddr returns a 127.0.0.1 address whose port is free right now and was
// not returned before in this process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
		// Processes testing in parallel start at different places.
		ports.next = low + (os.Getpid()*97)%(high-low)
	}
	for tries := 0; tries < high-low; tries++ {
		port := ports.next
		if ports.next++; ports.next >= high {
			ports.next = low
		}
		if ports.used[port] || !claim(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		ports.used[port] = true
		return l.Addr().String()
	}
	t.Fatalf("testport: no free port in %d-%d", low, high)
	return ""
}
