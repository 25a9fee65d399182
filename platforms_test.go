package runnel_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsOnOtherSystems: the module builds for macOS and Windows as
// well as Linux (issue 19 leftover 5). What only Linux or only some Unix
// systems have (statfs, flock, process groups, kill) sits in platform
// files, *_posix.go and *_other.go; the tests themselves may still need
// Linux (tmpfs, /proc).
func TestBuildsOnOtherSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module twice")
	}
	for _, goos := range []string{"darwin", "windows"} {
		cmd := exec.Command("go", "build", "./...")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go build ./...: %v\n%s", goos, err, out)
		}
	}
}
