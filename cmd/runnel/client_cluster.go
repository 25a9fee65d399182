package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/spf13/cobra"
)

// controllerInfo is one quorum member of GET /v1/cluster.
type controllerInfo struct {
	ID          int32  `json:"id"`
	Address     string `json:"address"`
	Role        string `json:"role"`
	Term        uint64 `json:"term"`
	LastIndex   uint64 `json:"last_index"`
	CommitIndex uint64 `json:"commit_index"`
}

// brokerInfo is one broker of GET /v1/cluster.
type brokerInfo struct {
	ID             int32  `json:"id"`
	State          string `json:"state"`
	Rack           string `json:"rack"`
	Epoch          int64  `json:"epoch"`
	MetadataOffset int64  `json:"metadata_offset"`
	HTTPAddress    string `json:"http_address"`
	KafkaAddress   string `json:"kafka_address"`
	Partitions     int32  `json:"partitions"`
	Leaders        int32  `json:"leaders"`
}

// clusterInfo is GET /v1/cluster.
type clusterInfo struct {
	ClusterID   string           `json:"cluster_id"`
	LeaderID    *int32           `json:"leader_id"`
	Controllers []controllerInfo `json:"controllers"`
	Brokers     []brokerInfo     `json:"brokers"`
}

func newClusterCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster id, the controller quorum and the brokers",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		var ci clusterInfo
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: "/v1/cluster"}, &ci)
		if err != nil {
			return err
		}
		if g.json() {
			return writeJSON(cmd.OutOrStdout(), raw)
		}
		return writeCluster(cmd.OutOrStdout(), ci)
	})
	return cmd
}

// writeCluster prints the cluster id, the active controller and two tables.
func writeCluster(w io.Writer, ci clusterInfo) error {
	fmt.Fprintf(w, "Cluster ID:         %s\n", orDash(ci.ClusterID))
	leader := "none"
	if ci.LeaderID != nil && *ci.LeaderID >= 0 {
		leader = fmt.Sprint(*ci.LeaderID)
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
