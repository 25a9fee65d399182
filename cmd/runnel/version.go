package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/server"
)

// newVersionCommand is `runnel version`: what the Go toolchain stamped into
// this binary, the same fields every node reports in GET /v1/cluster
// (node.build).
func newVersionCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := server.BuildInfo()
			if g.json() {
				return writeValueJSON(cmd.OutOrStdout(), b)
			}
			return writeVersion(cmd.OutOrStdout(), b)
		},
	}
}

func writeVersion(w io.Writer, b server.Build) error {
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	_, err := fmt.Fprintf(w, "runnel %s\ncommit %s\n%s %s/%s\n", b.Version, commit, b.GoVersion, runtime.GOOS, runtime.GOARCH)
	return err
}

// versionLine is what `runnel --version` prints.
func versionLine() string {
	b := server.BuildInfo()
	commit := b.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if b.Modified {
		commit += "+modified"
	}
	return fmt.Sprintf("%s (commit %s, %s)", b.Version, commit, b.GoVersion)
}
