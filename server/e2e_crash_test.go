package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// A kill -9 in the middle of a stream of acknowledged produces loses none of
// them: after restart each acknowledged record is readable exactly once at
// the offset it was acknowledged with, and offsets have no gaps.
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	rounds := 3
	if os.Getenv("RUNNEL_CHAOS") != "" {
		rounds = 20
	}
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "crash", "partitions": 2}, 201, nil)

	acked := map[[2]int64]string{} // (partition, offset) -> value
	var mu sync.Mutex
	seq := 0
	for round := 0; round < rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					seq++
					v, part := fmt.Sprintf("r%d-w%d-%d", round, w, seq), seq%2
					mu.Unlock()
					body, _ := json.Marshal(map[string]any{"records": []map[string]any{{"value": v, "partition": part}}})
					resp, err := client.Post(n.URL+"/v1/topics/crash/records?encoding=string", "application/json", bytes.NewReader(body))
					if err != nil {
						continue // the node died mid-request: not acknowledged
					}
					var out producedOffsets
					err = json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
					if resp.StatusCode == 200 && err == nil && len(out.Offsets) == 1 {
						mu.Lock()
						acked[[2]int64{int64(out.Offsets[0].Partition), out.Offsets[0].Offset}] = v
						mu.Unlock()
					}
				}
			}(w)
		}
		time.Sleep(400 * time.Millisecond)
		n.Kill()
		close(stop)
		wg.Wait()
		n.Start()
	}

	found := 0
	for p := int64(0); p < 2; p++ {
		next := int64(0)
		for {
			var got consumed
			c.json("GET", fmt.Sprintf("/v1/topics/crash/partitions/%d/records?offset=%d&encoding=string&max_records=1000", p, next), nil, 200, &got)
			for _, r := range got.Records {
				if r.Offset != next {
					t.Fatalf("partition %d: gap, offset %d after %d", p, r.Offset, next-1)
				}
				next++
				var v string
				json.Unmarshal(r.Value, &v)
				if want, ok := acked[[2]int64{p, r.Offset}]; ok {
					if v != want {
						t.Fatalf("partition %d offset %d holds %q, acknowledged %q", p, r.Offset, v, want)
					}
					found++
				}
			}
			if got.NextOffset >= got.HighWatermark {
				break
			}
		}
	}
	if found != len(acked) || len(acked) == 0 {
		t.Fatalf("%d of %d acknowledged records found after %d kill -9 rounds", found, len(acked), rounds)
	}
	t.Logf("%d acknowledged records survived %d kill -9 rounds", len(acked), rounds)
}

// The README's quickstart runs as written against a fresh node (only the
// address differs: the test node listens on a free port).
func TestReadmeQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart -->\\s*```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no <!-- quickstart --> sh block")
	}
	n := servertest.Start(t, servertest.Options{})
	script := strings.ReplaceAll(string(m[1]), "localhost:8080", n.HTTPAddr)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"offsets"`, `"book"`, `"high_watermark"`} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("quickstart output lacks %s:\n%s", want, out)
		}
	}
}
