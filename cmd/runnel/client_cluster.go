package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

// The shapes of GET /v1/cluster are the api package's (one set of wire
// types for the server, the CLI and the tests).
type (
	controllerInfo = api.Controller
	brokerInfo     = api.Broker
	clusterInfo    = api.Cluster
)

func newClusterCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster id, the controller quorum and the brokers",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		ci := clusterInfo{LeaderID: -1} // -1 also when a server leaves it out
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodGet, path: "/v1/cluster"}, &ci,
			func(w io.Writer) error { return writeCluster(w, ci) })
	})
	return cmd
}

// writeCluster prints the cluster id, the active controller and two tables.
func writeCluster(w io.Writer, ci clusterInfo) error {
	fmt.Fprintf(w, "Cluster ID:         %s\n", orDash(ci.ClusterID))
	leader := "none"
	if ci.LeaderID >= 0 {
		leader = fmt.Sprint(ci.LeaderID)
	}
	fmt.Fprintf(w, "Active controller:  %s\n\n", leader)

	ctrls := append([]controllerInfo(nil), ci.Controllers...)
	sort.Slice(ctrls, func(i, j int) bool { return ctrls[i].ID < ctrls[j].ID })
	fmt.Fprintln(w, "CONTROLLERS")
	t := newTable(w, "ID", "ADDRESS", "ROLE", "TERM", "LAST INDEX", "COMMIT INDEX")
	for _, c := range ctrls {
		t.row(fmt.Sprint(c.ID), orDash(c.Address), orDash(c.Role), fmt.Sprint(c.Term),
			fmt.Sprint(c.LastIndex), fmt.Sprint(c.CommitIndex))
	}
	if err := t.flush(); err != nil {
		return err
	}

	brokers := append([]brokerInfo(nil), ci.Brokers...)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].ID < brokers[j].ID })
	fmt.Fprintln(w, "\nBROKERS")
	t = newTable(w, "ID", "STATE", "RACK", "EPOCH", "METADATA OFFSET", "HTTP ADDRESS", "KAFKA ADDRESS", "REPLICAS", "LEADERS")
	for _, b := range brokers {
		t.row(fmt.Sprint(b.ID), orDash(b.State), orDash(b.Rack), fmt.Sprint(b.Epoch),
			fmt.Sprint(b.MetadataOffset), orDash(b.HTTPAddress), orDash(b.KafkaAddress),
			fmt.Sprint(b.Partitions), fmt.Sprint(b.Leaders))
	}
	return t.flush()
}
