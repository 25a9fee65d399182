package server

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Build identifies the running binary: its module version, the VCS commit it
// was built from and the Go version. `runnel version` prints it and every
// node reports it in GET /v1/cluster, so the two can be compared.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

// Set at link time by `make build` and the test harness
// (-ldflags "-X github.com/runnel/runnel/server.linkVersion=..."), for builds
// where the toolchain stamps no VCS information (-buildvcs=false, git
// worktrees); never written at run time.
var (
	linkVersion string
	linkCommit  string
)

// BuildInfo reads what the Go toolchain stamped into the binary (go build
// records the module version and, inside a git checkout, the commit), else
// what the linker flags set. Fields it cannot find are "unknown".
func BuildInfo() Build {
	b := Build{Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
	if linkVersion != "" {
		b.Version = linkVersion
	}
	if linkCommit != "" {
		b.Commit = strings.TrimSuffix(linkCommit, "-dirty")
		b.Modified = strings.HasSuffix(linkCommit, "-dirty")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; v != "" && (v != "(devel)" || linkVersion == "") {
		b.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}
