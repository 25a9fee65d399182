package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

// A reassignment is read from GET /v1/topics/{topic}: the api package's
// partition detail carries the fields of a running one.
type (
	reassignPartition = api.PartitionDetail
	reassignDetail    = api.TopicDetail
)

func newTopicReassignCommand(g *globalFlags) *cobra.Command {
	var (
		partition int32
		replicas  string
		cancel    bool
		wait      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reassign NAME",
		Short: "Move a partition to other brokers online, or cancel a move",
		Long: "Moves a partition to the given brokers (the first is the preferred leader). New replicas\n" +
			"copy the log from the leader; once all of them are in sync, the old replicas leave and\n" +
			"delete their copy. --cancel puts the partition back on the replicas it had before.",
		Example: "  runnel topic reassign orders -p 0 --replicas 2,3,4 --wait 5m\n  runnel topic reassign orders -p 0 --cancel",
		Args:    cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	fs.Int32VarP(&partition, "partition", "p", 0, "partition to move")
	fs.StringVar(&replicas, "replicas", "", "target broker ids, comma separated, preferred leader first")
	fs.BoolVar(&cancel, "cancel", false, "cancel the running reassignment of the partition")
	fs.DurationVar(&wait, "wait", 0, "wait up to this long for the reassignment to complete (0: return at once)")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		req, err := buildReassign(args[0], partition, replicas, cancel)
		if err != nil {
			return err
		}
		var d reassignDetail
		raw, err := c.getJSON(ctx, req, &d)
		if err != nil {
			return err
		}
		if !cancel && wait > 0 {
			if raw, err = waitReassigned(ctx, c, args[0], partition, wait, &d); err != nil {
				return err
			}
		}
		if g.json() {
			return writeJSON(cmd.OutOrStdout(), raw)
		}
		return writeReassign(cmd.OutOrStdout(), d, partition)
	})
	return cmd
}

// buildReassign is the request for a start (replicas) or a cancel.
func buildReassign(topic string, partition int32, replicas string, cancel bool) (apiRequest, error) {
	path := fmt.Sprintf("%s/partitions/%d/replicas", topicPath(topic), partition)
	switch {
	case partition < 0:
		return apiRequest{}, fmt.Errorf("partition %d: must be 0 or more", partition)
	case cancel && replicas != "":
		return apiRequest{}, errors.New("give --replicas or --cancel, not both")
	case cancel:
		return apiRequest{method: http.MethodDelete, path: path}, nil
	}
	ids, err := parseBrokerIDs(replicas)
	if err != nil {
		return apiRequest{}, err
	}
	return apiRequest{method: http.MethodPut, path: path, body: map[string][]int32{"replicas": ids}}, nil
}

// parseBrokerIDs reads "2,3,4": distinct, non-negative ids.
func parseBrokerIDs(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("--replicas is required (or --cancel)")
	}
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--replicas: %q is not a broker id", f)
		}
		if slices.Contains(ids, int32(id)) {
			return nil, fmt.Errorf("--replicas: broker %d listed twice", id)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// waitReassigned polls the topic until the partition has no reassignment
// running, and leaves the last answer in d.
func waitReassigned(ctx context.Context, c *apiClient, topic string, partition int32, wait time.Duration, d *reassignDetail) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		*d = reassignDetail{}
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: topicPath(topic)}, d)
		if err != nil {
			return nil, err
		}
		if p, ok := findPartition(*d, partition); ok && len(p.AddingReplicas)+len(p.RemovingReplicas) == 0 {
			return raw, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reassignment of %s-%d still running after %v", topic, partition, wait)
		case <-tick.C:
		}
	}
}

func findPartition(d reassignDetail, partition int32) (reassignPartition, bool) {
	for _, p := range d.Partitions {
		if p.Partition == partition {
			return p, true
		}
	}
	return reassignPartition{}, false
}

func writeReassign(w io.Writer, d reassignDetail, partition int32) error {
	p, ok := findPartition(d, partition)
	if !ok {
		return fmt.Errorf("partition %d not in the answer", partition)
	}
	state := "done"
	if len(p.AddingReplicas)+len(p.RemovingReplicas) > 0 {
		state = "running"
	}
	t := newTable(w, "PARTITION", "LEADER", "REPLICAS", "ISR", "ADDING", "REMOVING", "REASSIGNMENT")
	t.row(fmt.Sprint(p.Partition), fmt.Sprint(p.Leader), orDash(joinInts(p.Replicas)), orDash(joinInts(p.ISR)),
		orDash(joinInts(p.AddingReplicas)), orDash(joinInts(p.RemovingReplicas)), state)
	return t.flush()
}
