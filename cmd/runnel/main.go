// Command runnel is the event log server (`runnel serve`), its command-line
// client (`runnel topic|produce|consume|group|cluster|user|acl|quota|token
// ...`, talking to the REST API; `topic reassign` moves replicas) and the operator's tools: `runnel dev cluster` (a local
// cluster), `runnel certs create` (a CA and node certificates for TLS and
// inter-node mTLS), `runnel recover-quorum` (a new voter set on a stopped
// node) and `runnel version`.
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
