// Command runnel is the event log server, its command-line client and the
// operator's tools. Its commands (`runnel COMMAND --help` tells more):
//
//   - serve: run a node (controller, broker or both)
//   - topic: create, list, describe, alter-config, delete, reassign (move replicas online)
//   - produce: one record per input line (stdin or a file)
//   - consume: records as JSON lines (--group: as a member of a consumer group)
//   - group: list, describe, reset, delete
//   - cluster: the cluster id, the controller quorum and the brokers
//   - user: create, list, delete
//   - acl: create, list, delete
//   - quota: set, list, delete
//   - token: create, delete
//   - dev: cluster (a local cluster of child processes)
//   - certs: create (a CA and node certificates for TLS and inter-node mTLS)
//   - recover-quorum: a new voter set on a stopped node
//   - version
//
// The client commands (topic to token) talk to the REST API: human tables
// by default, -o json for the server's JSON (TestPackageDocListsCommands
// keeps this list whole).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "runnel:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "runnel",
		Short:         "runnel is an event log: HTTP first, Kafka compatible, Raft metadata",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("runnel {{.Version}}\n")
	var g globalFlags
	g.register(root.PersistentFlags())
	root.AddCommand(newServeCommand())
	root.AddCommand(newClientCommands(&g)...)
	root.AddCommand(newDevCommand())
	root.AddCommand(newCertsCommand())
	root.AddCommand(newRecoverQuorumCommand())
	root.AddCommand(newVersionCommand(&g))
	return root
}
