package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
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
