package runnel_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for the go command under scripts/fuzz.sh: one package,
// one target, and fuzz runs that answer as $MODE says, counted in $COUNT.
const fakeGo = `#!/usr/bin/env bash
case "$1 $2" in
  "list ./...") echo example.com/p ;;
  "test -list") echo FuzzA; echo ok ;;
  "test -run")
    n=$(( $(cat "$COUNT" 2>/dev/null || echo 0) + 1 )); echo $n > "$COUNT"
    case "$MODE" in
      pass) echo PASS ;;
      deadline-once|deadline-twice|deadline-always)
        if [ "$MODE" = deadline-always ] || [ $n -eq 1 ] || { [ "$MODE" = deadline-twice ] && [ $n -eq 2 ]; }; then
          printf 'fuzz: elapsed: 3s, execs: 100 (0/sec)\n--- FAIL: FuzzA (3.01s)\n    context deadline exceeded\nFAIL\nexit status 1\n'
          exit 1
        fi
        echo PASS ;;
      finding)
        printf -- '--- FAIL: FuzzA (0.20s)\n    --- FAIL: FuzzA (0.00s)\n        a_test.go:12: boom\n\n    Failing input written to testdata/fuzz/FuzzA/abc\n    context deadline exceeded\nFAIL\n'
        exit 1 ;;
      seed)
        printf -- '--- FAIL: FuzzA (0.00s)\n    --- FAIL: FuzzA/seed#0 (0.00s)\n        a_test.go:12: boom\nFAIL\n'
        exit 1 ;;
    esac ;;
esac
`

// TestFuzzScriptRetriesOnlyTheEngineDeadline: make fuzz-short runs a target
// again only when it failed with the fuzzing engine's own deadline error
// and nothing else (go.dev/issue/75804, Go before 1.27), up to 3 runs in
// all; a failing
// input or seed fails it at once.
func TestFuzzScriptRetriesOnlyTheEngineDeadline(t *testing.T) {
	dir := t.TempDir()
	goBin := filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode string
		ok   bool
		runs string
	}{
		{"pass", true, "1"},
		{"deadline-once", true, "2"},
		{"deadline-twice", true, "3"},
		{"deadline-always", false, "3"},
		{"finding", false, "1"},
		{"seed", false, "1"},
	} {
		count := filepath.Join(dir, tc.mode+".count")
		cmd := exec.Command("bash", "scripts/fuzz.sh")
		cmd.Env = append(os.Environ(), "GO="+goBin, "MODE="+tc.mode, "COUNT="+count, "FUZZTIME=3s")
		out, err := cmd.CombinedOutput()
		runs, _ := os.ReadFile(count)
		if (err == nil) != tc.ok || strings.TrimSpace(string(runs)) != tc.runs {
			t.Errorf("%s: err %v after %q runs, want ok %v after %s\n%s", tc.mode, err, runs, tc.ok, tc.runs, out)
		}
	}
}
