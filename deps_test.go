package runnel_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The front doors, the stores and the UI import no other project package
// (the root package with the embedded spec aside); only server composes them.
func TestPackageDependencyDirection(t *testing.T) {
	const mod = "github.com/runnel/runnel"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	leaves := map[string]bool{"api": true, "kafkaproto": true, "raftfsm": true, "segments": true, "web": true}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod+"/")
		top := strings.SplitN(pkg, "/", 2)[0]
		if !leaves[top] {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			impTop := strings.SplitN(strings.TrimPrefix(imp, mod+"/"), "/", 2)[0]
			if impTop != top {
				t.Errorf("%s imports %s: %s may import no other project package", fields[0], imp, top)
			}
		}
	}
	if checked < len(leaves) {
		t.Fatalf("checked %d packages, expected at least %d", checked, len(leaves))
	}
}
