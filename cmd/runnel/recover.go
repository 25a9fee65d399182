package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/server"
)

// newRecoverQuorumCommand is `runnel recover-quorum`: rewrite the metadata
// quorum's voters in a stopped node's data dir, when a majority of the
// controllers is gone for good (README "Recovering a lost quorum").
func newRecoverQuorumCommand() *cobra.Command {
	def := server.DefaultConfig()
	var (
		nodeID  int32
		dataDir string
		ctrls   string
		logging struct{ level, format string }
	)
	cmd := &cobra.Command{
		Use:   "recover-quorum --controllers id@host:port,... [--data-dir DIR] [--node-id N]",
		Short: "Force a new controller quorum on a stopped node (when a majority is lost for good)",
		Long: "Rewrite the controller quorum stored in a STOPPED node's data dir to the voters given\n" +
			"by --controllers (which must include this node), keeping its metadata. Use it only when\n" +
			"a majority of the controllers is gone for good: start the node again afterwards, then add\n" +
			"new controllers with POST /v1/cluster/controllers. Refused while the node runs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvAndFile(cmd.Flags(), ""); err != nil {
				return err
			}
			voters, err := server.ParseControllers(ctrls)
			if err != nil {
				return fmt.Errorf("--controllers: %w", err)
			}
			if len(voters) == 0 {
				return fmt.Errorf("--controllers: name the new voters (at least this node)")
			}
			logger, err := newLogger(logging.level, logging.format)
			if err != nil {
				return err
			}
			if err := server.RecoverQuorum(dataDir, nodeID, voters, logger); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d: the controller quorum is now %s; start the node again\n", nodeID, ctrls)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.Int32Var(&nodeID, "node-id", def.NodeID, "this node's id (it must be among --controllers)")
	fs.StringVar(&dataDir, "data-dir", def.DataDir, "the stopped node's data directory")
	fs.StringVar(&ctrls, "controllers", "", "the new controller quorum as id@host:port,...")
	fs.StringVar(&logging.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&logging.format, "log-format", "text", "log format: text or json")
	return cmd
}
