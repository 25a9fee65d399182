package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/httpdoor"
)

// An Open that fails after its listeners are up (here: the broker cannot
// create its partitions directory) releases every port it bound, so the
// same addresses can be served again in the same process.
func TestOpenFailureReleasesListeners(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "partitions"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.HTTPAddr = testport.FreeAddr(t)
	cfg.KafkaAddr = testport.FreeAddr(t)
	cfg.RaftAddr = testport.FreeAddr(t)
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := Open(cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded with a file where the partitions directory goes")
	}
	for name, addr := range map[string]string{"HTTP": cfg.HTTPAddr, "Kafka": cfg.KafkaAddr, "raft": cfg.RaftAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s port %s still bound after a failed Open: %v", name, addr, err)
			continue
		}
		ln.Close()
	}
}

// A connection the inter-node port hands on (here an inter-broker one that
// never sends its hello) is owned by the server: Close closes it and waits
// for the goroutine reading it, instead of leaving it to its 10 s hello
// deadline after the server is gone.
func TestCloseEndsConnectionHandoffs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = testport.FreeAddr(t)
	cfg.KafkaAddr = ""
	cfg.RaftAddr = testport.FreeAddr(t)
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", cfg.RaftAddr)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{protoKafka}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	// Close takes far longer than the mux needs to read the byte and hand
	// the connection on; were Close first, the mux itself would close it
	// (the check below holds either way).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server closed, and the inter-broker connection waiting for its hello is still open")
	}
}

// connsTo counts this machine's open TCP connections to addr (a
// 127.0.0.1 port) from the dialing side: ESTABLISHED, or CLOSE_WAIT (the
// peer closed, the dialer did not), as /proc/net/tcp lists them.
func connsTo(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp to count connections with: %v", err)
	}
	want := fmt.Sprintf("0100007F:%04X", p) // 127.0.0.1, little-endian, and the port
	n := 0
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && (f[3] == "01" || f[3] == "08") {
			n++
		}
	}
	return n
}

// A node's forwarded HTTP keeps its connections to other nodes idle in a
// pool between requests; Close closes them, instead of leaving them (and
// their goroutines, and a socket on the peer) for the pool's idle timeout
// after the node has stopped. Two nodes in this process: the broker node
// forwards a consume to the controller node, and closes.
func TestCloseClosesForwardedConnections(t *testing.T) {
	base := func(id int32) Config {
		cfg := DefaultConfig()
		cfg.NodeID = id
		cfg.DataDir = t.TempDir()
		cfg.HTTPAddr = testport.FreeAddr(t)
		cfg.KafkaAddr = ""
		cfg.RaftAddr = testport.FreeAddr(t)
		cfg.Logger = slog.New(slog.DiscardHandler)
		return cfg
	}
	cfg1 := base(1)
	s1, err := Open(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	cfg2 := base(2)
	cfg2.Roles = []Role{RoleBroker}
	cfg2.Controllers = []raftfsm.Server{{ID: 1, Address: cfg1.RaftAddr}}
	s2, err := Open(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s2.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An unknown topic: the answer is a problem, the connection stays
	// pooled all the same.
	_, err = s2.forward.Consume(ctx, httpdoor.NodeHost(1), api.ConsumeRequest{Topic: "none", MaxRecords: 1, MaxBytes: 1})
	if !errors.Is(err, api.ErrUnknownTopic) {
		t.Fatalf("forwarded consume of an unknown topic: %v", err)
	}
	if connsTo(t, cfg1.RaftAddr) == 0 {
		t.Fatal("no connection to the peer's inter-node port counted while the node runs")
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	// Every connection the closed node made to its peer's inter-node port
	// (forwarded HTTP, controller RPC, ...) is closed by now; the wait only
	// lets the kernel's view catch up.
	for deadline := time.Now().Add(10 * time.Second); connsTo(t, cfg1.RaftAddr) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to the peer's inter-node port still open after the node closed", connsTo(t, cfg1.RaftAddr))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
