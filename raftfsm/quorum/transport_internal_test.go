package quorum

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/internode"
)

// The stream layer kicks the leader watch when a connection a peer
// opened ends, and its Close ends the connections raft dialled (a
// TimeoutNow to itself in flight would otherwise hold Close for the
// transport's timeout).
func TestStreamLayerConnEnds(t *testing.T) {
	m, err := internode.Listen(testport.FreeAddr(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := newStreamLayer(m.Addr(), nil, func() {})
	kicked := make(chan string, 4)
	s.ended = func(peer string) { kicked <- peer }
	_ = m.Handle(ProtoRaft, s.deliver)
	m.Start()

	// A peer's connection: its end is seen by raft's read and kicks.
	peer, err := internode.Dial(t.Context(), m.Addr().String(), ProtoRaft, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	peer.Close()
	if _, err := io.ReadAll(accepted); err != nil {
		t.Fatal(err)
	}
	if got := <-kicked; got != "" {
		t.Fatalf("kicked for peer %q, want \"\" (no peer TLS)", got)
	}
	accepted.Close()

	// A connection raft dialled (here to itself) ends when the layer closes.
	dialled, err := s.Dial(raft.ServerAddress(m.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_ = dialled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := dialled.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a dialled connection after Close: %v, want it closed", err)
	}
	if _, err := s.Dial(raft.ServerAddress(m.Addr().String()), 5*time.Second); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}
