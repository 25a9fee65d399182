package servertest

import (
	"fmt"
	"os"
	"testing"
)

// MissingTool ends a test whose external tool (kcat, chromium, node, npm
// packages) is not installed. With CI set that is a failure: .ci/run
// installs every tool. Otherwise the test is skipped, and the skip is
// appended to the file named by RUNNEL_SKIP_LOG, from which `make test`
// prints one summary line, so a skipped client test is never silent.
func MissingTool(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: .ci/run installs every tool the tests need)", reason)
	}
	if path := os.Getenv("RUNNEL_SKIP_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), reason)
			f.Close()
		}
	}
	t.Skip(reason)
}
