package quorum

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
)

// TestLoneVoterSlowVoteKeepsItsElection: a lone voter whose vote takes
// longer to write than its heartbeat timeout (a loaded machine's disk)
// still wins its first election: no "Election timeout reached" WARN on a
// healthy node (TestLogsQuietSingleNode failed so in CI at load 40, the
// vote's writes taking 370 ms against the 100-200 ms timeout). raft
// notices its timer only after the vote is written, and then picks the
// timer or the vote at random, so several nodes are started: with the old
// timeout each had an even chance to restart its election.
func TestLoneVoterSlowVoteKeepsItsElection(t *testing.T) {
	var mu sync.Mutex
	stableWriteHook = func(key []byte) {
		if string(key) == "LastVoteTerm" {
			time.Sleep(400 * time.Millisecond)
		}
	}
	t.Cleanup(func() { stableWriteHook = nil })
	for i := range 6 {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
		n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: testport.FreeAddr(t), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = n.WaitReady(ctx)
		cancel()
		_ = n.Close()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if strings.Contains(out, "Election timeout reached") {
			t.Fatalf("node %d restarted its election:\n%s", i, out)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
