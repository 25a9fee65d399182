// Command chaostable rewrites the chaos results table in README.md from the
// JSON lines the chaos scenarios (server/e2e_chaos_test.go) append to
// RUNNEL_CHAOS_RESULTS; `make chaos` runs it after the scenarios.
//
//	go run ./scripts/chaostable -results bin/chaos-results.jsonl -readme README.md
//
// With -keep, rows of scenarios the results do not have stay as they are
// (a run of some scenarios only adds or replaces their rows).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

const (
	begin = "<!-- chaos-results:begin (make chaos rewrites this table) -->"
	end   = "<!-- chaos-results:end -->"
)

// result is one scenario run, as the scenarios write it.
type result = servertest.ChaosResult

// row sums the runs of one scenario.
type row struct {
	runs                                 int
	faults, acked, lost, dup, order      int
	ackedOne, lostOne, gaps, dups, dirty int
	lossReports                          int
	identical, ordered, digests          bool
	worstUnavailable                     float64
}

func main() {
	results := flag.String("results", "bin/chaos-results.jsonl", "JSON lines written by the chaos scenarios")
	readme := flag.String("readme", "README.md", "the file whose table is rewritten")
	keep := flag.Bool("keep", false, "keep the table's rows of scenarios that are not in the results")
	flag.Parse()
	if err := run(*results, *readme, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "chaostable:", err)
		os.Exit(1)
	}
}

func run(resultsPath, readmePath string, keep bool) error {
	f, err := os.Open(resultsPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var order []string
	rows := map[string]*row{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", resultsPath, err)
		}
		w := rows[r.Scenario]
		if w == nil {
			w = &row{identical: true, ordered: true, digests: true}
			rows[r.Scenario] = w
			order = append(order, r.Scenario)
		}
		w.runs++
		w.faults += r.Faults
		w.acked += r.Acked
		w.lost += r.Lost
		w.dup += r.Duplicated
		w.order += r.OrderBroken
		w.ackedOne += r.AckedOne
		w.lostOne += r.LostOne
		w.gaps += r.ConsumerGaps
		w.dups += r.ConsumerDups
		w.dirty += r.DirtyReads
		w.lossReports += r.DataLossSeen
		w.identical = w.identical && r.ReplicasEqual
		w.ordered = w.ordered && r.EpochsOrdered
		w.digests = w.digests && r.DigestsEqual
		w.worstUnavailable = max(w.worstUnavailable, r.Unavailable)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(rows) == 0 {
		return errors.New("no results: did the scenarios run (RUNNEL_CHAOS=1)?")
	}
	old, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", readmePath, begin, end)
	}
	lines := map[string]string{}
	for _, name := range order {
		w := rows[name]
		lines[name] = fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d / %d | %d / %d / %d / %d | %s | %.1f s |",
			name, w.runs, w.faults, w.acked, w.lost, w.dup, w.order, w.ackedOne, w.lostOne,
			w.gaps, w.dups, w.dirty, w.lossReports, yesNo(w.identical, w.ordered, w.digests), w.worstUnavailable)
	}
	if keep {
		order = keptOrder(string(old[i:j]), order, lines)
	}
	var tb strings.Builder
	tb.WriteString(begin + "\n")
	fmt.Fprintf(&tb, "Last `make chaos`: %s.\n\n", time.Now().UTC().Format("2006-01-02"))
	tb.WriteString("| scenario | runs | faults | acks=all acked | lost | duplicated | order broken | acks=1 acked / lost | consumer gaps / dups / dirty / loss reports | replicas identical, epochs ordered, digests equal | max unavailable |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range order {
		tb.WriteString(lines[name] + "\n")
	}
	tb.WriteString(end)
	out := append(append(append([]byte{}, old[:i]...), tb.String()...), old[j+len(end):]...)
	return os.WriteFile(readmePath, out, 0o644)
}

// keptOrder puts the old table's rows first, in their order (replaced by
// new results where there are some), then the scenarios new to the table;
// lines gets the kept rows.
func keptOrder(table string, fresh []string, lines map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 || strings.HasPrefix(l, "|---") {
			continue
		}
		name := strings.TrimSpace(cells[1])
		if name == "scenario" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
		if _, ok := lines[name]; !ok {
			lines[name] = l
		}
	}
	for _, name := range fresh {
		if !seen[name] {
			out = append(out, name)
		}
	}
	return out
}

func yesNo(bs ...bool) string {
	var parts []string
	for _, b := range bs {
		if b {
			parts = append(parts, "yes")
		} else {
			parts = append(parts, "**no**")
		}
	}
	return strings.Join(parts, ", ")
}
