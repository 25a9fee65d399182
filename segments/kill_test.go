package segments

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
)

const killChildEnv = "RUNNEL_SEGMENTS_KILL_CHILD"

// TestKillChildHelper is the child of TestKillDuringAppends: it appends to
// the log in $RUNNEL_SEGMENTS_KILL_CHILD forever and prints each
// acknowledged last offset.
func TestKillChildHelper(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestKillDuringAppends")
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.RetentionBytes = 1 << 20
	l := mustOpen(t, dir, cfg, Options{})
	// A new leader epoch every 200 appends, on from the last round's.
	first := l.LeaderEpoch() + 1
	for i := 0; ; i++ {
		info, err := l.Append(valueBatch(1+i%7, 200, time.Now().UnixMilli()), first+int32(i/200))
		if err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("ack %d\n", info.LastOffset)
		if i%100 == 99 {
			if err := l.Maintain(time.Now()); err != nil {
				fmt.Printf("error %v\n", err)
				os.Exit(1)
			}
		}
	}
}

// TestKillDuringAppends runs a child process that appends, kills it with
// SIGKILL at a random moment, reopens its directory and checks that every
// acknowledged record is there, the log is consistent (its leader epochs
// those of its batches), and it takes appends; three rounds on the same
// directory.
func TestKillDuringAppends(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rounds := 3
	if os.Getenv("RUNNEL_CHAOS") != "" {
		rounds = 20
	}
	dir := t.TempDir()
	for round := 0; round < rounds; round++ {
		acked := runAndKill(t, dir, 300+round%3*700)
		cfg := DefaultConfig()
		cfg.SegmentBytes = 64 << 10
		cfg.IndexIntervalBytes = 1024
		l := mustOpen(t, dir, cfg, Options{})
		if end := l.EndOffset(); end <= acked {
			t.Fatalf("round %d: end offset %d, acknowledged up to %d", round, end, acked)
		}
		for off := l.StartOffset(); off < l.EndOffset(); {
			b := readAll(t, l, off, 1<<20)
			if _, err := recordbatch.Split(b, 0, recordbatch.CountExact); err != nil {
				t.Fatalf("round %d: bad batch at %d: %v", round, off, err)
			}
			bs := decodeBatches(t, b)
			last := bs[len(bs)-1]
			off = last.FirstOffset + int64(last.LastOffsetDelta) + 1
		}
		checkIndexes(t, l)
		checkEpochsMatchBatches(t, l, fmt.Sprintf("round %d", round))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runAndKill starts the child, lets it acknowledge at least n appends, kills
// it and returns the last acknowledged offset.
func runAndKill(t *testing.T, dir string, n int) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := int64(-1)
	for seen := 0; sc.Scan(); {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "ack "); ok {
			acked, _ = strconv.ParseInt(rest, 10, 64)
			if seen++; seen == n {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if strings.HasPrefix(line, "error") {
			t.Fatalf("child: %s", line)
		}
	}
	cmd.Wait()
	if acked < 0 {
		t.Fatal("child acknowledged nothing")
	}
	return acked
}
