package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
)

// errBadConfig reports a -c value that is not key=value.
var errBadConfig = errors.New("config must be key=value")

// Topic bodies are the api package's (responses, as the server writes
// them) and the generated client's (requests, whose optional fields are
// pointers, so the server's defaults apply when a flag is not given): one
// set of wire types for the server, the CLI and the tests.
type (
	topicSummary        = api.TopicSummary
	topicList           = api.TopicList
	partitionInfo       = api.PartitionDetail
	topicDetail         = api.TopicDetail
	createTopicRequest  = client.CreateTopicRequest
	alterConfigsRequest = api.AlterConfigsRequest
)

func topicPath(name string) string { return "/v1/topics/" + url.PathEscape(name) }

func newTopicCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, delete and configure topics",
	}
	cmd.AddCommand(
		newTopicCreateCommand(g),
		newTopicListCommand(g),
		newTopicDescribeCommand(g),
		newTopicDeleteCommand(g),
		newTopicAlterConfigCommand(g),
		newTopicReassignCommand(g),
	)
	return cmd
}

func newTopicCreateCommand(g *globalFlags) *cobra.Command {
	var (
		partitions, rf int32
		configs        []string
	)
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a topic",
		Example: "  runnel topic create orders -p 6 -r 3 -c retention.ms=86400000",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 0, "number of partitions (default: the server's)")
	cmd.Flags().Int32VarP(&rf, "replication-factor", "r", 0, "replicas per partition (default: the server's default)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		req, err := buildCreateTopic(args[0], partitions, cmd.Flags().Changed("partitions"),
			rf, cmd.Flags().Changed("replication-factor"), configs)
		if err != nil {
			return err
		}
		var created topicDetail
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodPost, path: "/v1/topics", body: req}, &created,
			func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Created topic %q with %d partition(s), replication factor %d.\n",
					req.Name, len(created.Partitions), created.ReplicationFactor)
				return err
			})
	})
	return cmd
}

// buildCreateTopic validates the create arguments; partitions and rf are sent
// only when set, so that the server's defaults apply otherwise.
func buildCreateTopic(name string, partitions int32, partsSet bool, rf int32, rfSet bool, configs []string) (createTopicRequest, error) {
	if strings.TrimSpace(name) == "" {
		return createTopicRequest{}, errors.New("topic name is empty")
	}
	req := createTopicRequest{Name: name}
	if partsSet {
		if partitions < 1 {
			return createTopicRequest{}, fmt.Errorf("--partitions must be at least 1, not %d", partitions)
		}
		req.Partitions = &partitions
	}
	if rfSet {
		if rf < 1 {
			return createTopicRequest{}, fmt.Errorf("--replication-factor must be at least 1, not %d", rf)
		}
		req.ReplicationFactor = &rf
	}
	cfg, err := parseConfigs(configs)
	if err != nil {
		return createTopicRequest{}, err
	}
	if len(cfg) > 0 {
		req.Configs = &cfg
	}
	return req, nil
}

// parseConfigs turns ["k=v", ...] into a map. Values may contain '=' and ','.
func parseConfigs(kvs []string) (map[string]string, error) {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w, got %q", errBadConfig, kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("config %q given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

func newTopicListCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Long: "List topics ordered by name, page by page as the server sends them\n" +
			"(rows are printed as each page arrives; -o json prints one document).",
		Args: cobra.NoArgs,
	}
	query := pageFlags(cmd, "topics")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		q := query()
		t := newTable(cmd.OutOrStdout(), "NAME", "PARTITIONS", "REPLICATION", "SIZE")
		return listPages(ctx, cmd, g, c, "/v1/topics", "topics", q, func(raw []byte) error {
			var list topicList
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("reading the topic list: %w", err)
			}
			writeTopicRows(t, list)
			return t.flush()
		})
	})
	return cmd
}

// pageFlags gives a list command of what (topics, groups) --prefix and
// --page-size, and returns the query they make for listPages.
func pageFlags(cmd *cobra.Command, what string) func() url.Values {
	prefix := cmd.Flags().String("prefix", "", "only "+what+" whose name starts with this")
	pageSize := cmd.Flags().Int("page-size", 0, what+" asked per request (0: the server's default)")
	return func() url.Values {
		q := url.Values{}
		if *prefix != "" {
			q.Set("prefix", *prefix)
		}
		if *pageSize > 0 {
			q.Set("limit", strconv.Itoa(*pageSize))
		}
		return q
	}
}

// listPages walks the pages of a list endpoint (GET path with prefix,
// limit and cursor, answering next_cursor). Each page goes to onPage as it
// arrives; with -o json the items under key of every page are printed as
// they arrive too, as the elements of one document's array (the same
// document, indented, that one response holding every item would print):
// a list of 100,000 topics is never held whole.
func listPages(ctx context.Context, cmd *cobra.Command, g *globalFlags, c *apiClient, path, key string, q url.Values, onPage func(raw []byte) error) error {
	var arr *jsonArrayWriter
	if g.json() {
		arr = &jsonArrayWriter{w: cmd.OutOrStdout(), key: key}
		onPage = func(raw []byte) error {
			var page map[string]json.RawMessage
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &page); err != nil {
				return fmt.Errorf("reading %s: %w", path, err)
			}
			if err := json.Unmarshal(page[key], &items); err != nil {
				return fmt.Errorf("reading %s: %w", path, err)
			}
			return arr.write(items)
		}
	}
	for {
		var page map[string]json.RawMessage
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: path, query: q}, &page)
		if err != nil {
			return err
		}
		if err := onPage(raw); err != nil {
			return err
		}
		var next string
		if c, ok := page["next_cursor"]; !ok || json.Unmarshal(c, &next) != nil || next == "" {
			break
		}
		q.Set("cursor", next)
	}
	if arr != nil {
		return arr.close()
	}
	return nil
}

// jsonArrayWriter prints {"key": [items...]} indented as writeJSON would,
// item by item, so the document streams.
type jsonArrayWriter struct {
	w       io.Writer
	key     string
	started bool
	buf     bytes.Buffer
}

func (a *jsonArrayWriter) write(items []json.RawMessage) error {
	a.buf.Reset()
	for _, it := range items {
		if !a.started {
			a.started = true
			fmt.Fprintf(&a.buf, "{\n  %q: [\n    ", a.key)
		} else {
			a.buf.WriteString(",\n    ")
		}
		if err := json.Indent(&a.buf, bytes.TrimSpace(it), "    ", "  "); err != nil {
			return fmt.Errorf("reading %s: %w", a.key, err)
		}
	}
	_, err := a.w.Write(a.buf.Bytes())
	return err
}

func (a *jsonArrayWriter) close() error {
	end := "\n  ]\n}\n"
	if !a.started {
		end = fmt.Sprintf("{\n  %q: []\n}\n", a.key)
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// writeTopicRows adds one page of topics, sorted by name, to t.
func writeTopicRows(t *table, list topicList) {
	topics := append([]topicSummary(nil), list.Topics...)
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	for _, tp := range topics {
		name := tp.Name
		if tp.Internal {
			name += " (internal)"
		}
		t.row(name, fmt.Sprint(tp.Partitions), fmt.Sprint(tp.ReplicationFactor), formatBytes(tp.SizeBytes))
	}
}

func newTopicDescribeCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "describe NAME",
		Aliases: []string{"get"},
		Short:   "Show a topic's configs and partitions",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		var d topicDetail
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodGet, path: topicPath(args[0])}, &d,
			func(w io.Writer) error { return writeTopicDetail(w, d) })
	})
	return cmd
}

// writeTopicDetail prints the topic header, its configs and a partition table.
func writeTopicDetail(w io.Writer, d topicDetail) error {
	fmt.Fprintf(w, "Topic:               %s\n", d.Name)
	if d.ID != "" {
		fmt.Fprintf(w, "ID:                  %s\n", d.ID)
	}
	fmt.Fprintf(w, "Partitions:          %d\n", len(d.Partitions))
	fmt.Fprintf(w, "Replication factor:  %d\n", d.ReplicationFactor)
	if err := writeConfigs(w, d.Configs); err != nil {
		return err
	}
	fmt.Fprintln(w)
	parts := append([]partitionInfo(nil), d.Partitions...)
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	t := newTable(w, "PARTITION", "LEADER", "REPLICAS", "ISR", "START", "END", "HIGH WATERMARK", "SIZE")
	for _, p := range parts {
		leader := fmt.Sprint(p.Leader)
		if p.Leader < 0 {
			leader = "none"
		}
		t.row(fmt.Sprint(p.Partition), leader, orDash(joinInts(p.Replicas)), orDash(joinInts(p.ISR)),
			fmt.Sprint(p.StartOffset), fmt.Sprint(p.EndOffset), fmt.Sprint(p.HighWatermark), formatBytes(p.SizeBytes))
	}
	return t.flush()
}

func newTopicDeleteCommand(g *globalFlags) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a topic and its data",
		Long: "Delete a topic and every record in it. Asks for confirmation on a terminal;\n" +
			"elsewhere (scripts) it needs --yes.",
		Example: "  runnel topic delete orders --yes",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		if !yes {
			if err := confirm(cmd, fmt.Sprintf("Delete topic %q and all its records? [y/N] ", args[0])); err != nil {
				return err
			}
		}
		raw, err := c.do(ctx, apiRequest{method: http.MethodDelete, path: topicPath(args[0])})
		if err != nil {
			return err
		}
		if g.json() {
			if len(strings.TrimSpace(string(raw))) > 0 {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			return writeValueJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "deleted": true})
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted topic %q.\n", args[0])
		return err
	})
	return cmd
}

func newTopicAlterConfigCommand(g *globalFlags) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:     "alter-config NAME",
		Short:   "Set or delete topic configs",
		Example: "  runnel topic alter-config orders -c retention.ms=3600000 --delete cleanup.policy",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringArrayVarP(&set, "config", "c", nil, "config to set, key=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "config key to reset to its default (repeatable)")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		req, err := buildAlterConfigs(set, del)
		if err != nil {
			return err
		}
		var d topicDetail
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodPatch, path: topicPath(args[0]) + "/configs", body: req}, &d)
		if err != nil {
			return err
		}
		if g.json() {
			if len(strings.TrimSpace(string(raw))) > 0 {
				return writeJSON(cmd.OutOrStdout(), raw)
			}
			return writeValueJSON(cmd.OutOrStdout(), req)
		}
		if _, err := fmt.Fprintf(cmd.OutOrStdout(), "Updated configs of topic %q.\n", args[0]); err != nil {
			return err
		}
		return writeConfigs(cmd.OutOrStdout(), d.Configs)
	})
	return cmd
}

// buildAlterConfigs checks that at least one change is asked and that no key
// is both set and deleted.
func buildAlterConfigs(set, del []string) (alterConfigsRequest, error) {
	if len(set) == 0 && len(del) == 0 {
		return alterConfigsRequest{}, errors.New("nothing to change: give -c key=value or --delete key")
	}
	m, err := parseConfigs(set)
	if err != nil {
		return alterConfigsRequest{}, err
	}
	req := alterConfigsRequest{Configs: make(map[string]*string, len(m)+len(del))}
	for k, v := range m {
		req.Configs[k] = &v
	}
	for _, k := range del {
		k = strings.TrimSpace(k)
		if k == "" {
			return alterConfigsRequest{}, errors.New("--delete needs a config key")
		}
		if _, both := m[k]; both {
			return alterConfigsRequest{}, fmt.Errorf("config %q is both set and deleted", k)
		}
		req.Configs[k] = nil
	}
	return req, nil
}

// writeConfigs prints explicitly set configs sorted by key, one per line.
func writeConfigs(w io.Writer, configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		_, err := fmt.Fprintln(w, "Configs:             (all defaults)")
		return err
	}
	fmt.Fprintln(w, "Configs:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s=%s\n", k, configs[k])
	}
	return nil
}
