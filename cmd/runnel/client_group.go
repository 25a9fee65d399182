package main

// runnel group list|describe|reset|delete, and `runnel consume TOPIC
// --group G` (an HTTP member of the group: join, poll, commit, leave).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

// Group bodies are the api package's (one set of wire types for the
// server, the CLI and the tests).
type (
	groupDetail = api.GroupDetail
)

func groupPath(name string) string { return "/v1/groups/" + url.PathEscape(name) }

func newGroupCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset and delete consumer groups",
	}
	cmd.AddCommand(newGroupListCommand(g), newGroupDescribeCommand(g), newGroupResetCommand(g), newGroupDeleteCommand(g))
	return cmd
}

func newGroupListCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List consumer groups", Args: cobra.NoArgs}
	query := pageFlags(cmd, "groups")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		q := query()
		t := newTable(cmd.OutOrStdout(), "GROUP", "STATE", "PROTOCOL", "MEMBERS", "COORDINATOR", "LAG")
		return listPages(ctx, cmd, g, c, "/v1/groups", "groups", q, func(raw []byte) error {
			var res api.GroupList
			if err := json.Unmarshal(raw, &res); err != nil {
				return fmt.Errorf("reading the group list: %w", err)
			}
			for _, s := range res.Groups {
				t.row(s.Group, s.State, orDash(s.Protocol), strconv.Itoa(s.Members), fmt.Sprint(s.Coordinator), fmt.Sprint(s.Lag))
			}
			return t.flush()
		})
	})
	return cmd
}

func newGroupDescribeCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe GROUP", Aliases: []string{"get"}, Short: "Show a group's members, offsets and lag", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		var d groupDetail
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodGet, path: groupPath(args[0])}, &d,
			func(w io.Writer) error { return writeGroupDetail(w, d) })
	})
	return cmd
}

func writeGroupDetail(w io.Writer, d groupDetail) error {
	fmt.Fprintf(w, "Group:        %s\nState:        %s\nProtocol:     %s\nGeneration:   %d\nCoordinator:  %d\nTotal lag:    %d\n\n",
		d.Group, d.State, orDash(d.Protocol), d.Generation, d.Coordinator, d.Lag)
	t := newTable(w, "MEMBER", "KIND", "CLIENT", "HOST", "ASSIGNMENT")
	for _, m := range d.Members {
		var as []string
		for _, a := range m.Assignment {
			as = append(as, a.Topic+":"+joinInts(a.Partitions))
		}
		t.row(m.MemberID, m.Kind, orDash(m.ClientID), orDash(m.ClientHost), orDash(strings.Join(as, " ")))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "LAG TIME")
	for _, o := range d.Offsets {
		lagTime := "-"
		if o.LagMS != nil {
			lagTime = (time.Duration(*o.LagMS) * time.Millisecond).String()
		}
		t.row(o.Topic, fmt.Sprint(o.Partition), fmt.Sprint(o.CommittedOffset), fmt.Sprint(o.EndOffset), fmt.Sprint(o.Lag), lagTime)
	}
	return t.flush()
}

// resetOptions are the flags of group reset.
type resetOptions struct {
	toEarliest, toLatest bool
	toOffset             int64
	toTime               string
	topics               []string
	execute              bool
}

// request builds the reset body from the flags (exactly one target).
func (o resetOptions) request() (map[string]any, error) {
	body := map[string]any{"dry_run": !o.execute}
	n := 0
	if o.toEarliest {
		body["strategy"], n = "earliest", n+1
	}
	if o.toLatest {
		body["strategy"], n = "latest", n+1
	}
	if o.toOffset >= 0 {
		body["strategy"], body["offset"], n = "offset", o.toOffset, n+1
	}
	if o.toTime != "" {
		ts, err := parseResetTime(o.toTime)
		if err != nil {
			return nil, err
		}
		body["strategy"], body["timestamp"], n = "timestamp", ts, n+1
	}
	if n != 1 {
		return nil, errors.New("give exactly one of --to-earliest, --to-latest, --to-offset, --to-time")
	}
	if len(o.topics) > 0 {
		body["topics"] = o.topics
	}
	return body, nil
}

// parseResetTime reads RFC 3339 or milliseconds since the epoch.
func parseResetTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("--to-time must be RFC 3339 (2026-01-02T15:04:05Z) or ms since the epoch, not %q", s)
	}
	return t.UnixMilli(), nil
}

func newGroupResetCommand(g *globalFlags) *cobra.Command {
	o := resetOptions{}
	cmd := &cobra.Command{
		Use:   "reset GROUP",
		Short: "Reset the offsets of a group with no active members (dry run unless --execute)",
		Example: "  runnel group reset billing --to-earliest\n" +
			"  runnel group reset billing --topic orders --to-time 2026-01-02T15:04:05Z --execute",
		Args: cobra.ExactArgs(1),
	}
	f := cmd.Flags()
	f.BoolVar(&o.toEarliest, "to-earliest", false, "to the log start")
	f.BoolVar(&o.toLatest, "to-latest", false, "to the log end")
	f.Int64Var(&o.toOffset, "to-offset", -1, "to this offset (clamped to each partition's range)")
	f.StringVar(&o.toTime, "to-time", "", "to the first record at or after this time")
	f.StringSliceVar(&o.topics, "topic", nil, "reset every partition of these topics (default: the partitions with committed offsets)")
	f.BoolVar(&o.execute, "execute", false, "commit the new offsets (default: only show them)")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		body, err := o.request()
		if err != nil {
			return err
		}
		var res struct {
			DryRun  bool `json:"dry_run"`
			Offsets []struct {
				Topic         string `json:"topic"`
				Partition     int32  `json:"partition"`
				CurrentOffset int64  `json:"current_offset"`
				NewOffset     int64  `json:"new_offset"`
			} `json:"offsets"`
		}
		req := apiRequest{method: http.MethodPost, path: groupPath(args[0]) + "/offsets/reset", body: body}
		return g.show(ctx, cmd, c, req, &res, func(w io.Writer) error {
			t := newTable(w, "TOPIC", "PARTITION", "CURRENT", "NEW")
			for _, p := range res.Offsets {
				cur := fmt.Sprint(p.CurrentOffset)
				if p.CurrentOffset < 0 {
					cur = "-"
				}
				t.row(p.Topic, fmt.Sprint(p.Partition), cur, fmt.Sprint(p.NewOffset))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if res.DryRun {
				fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing committed (add --execute).")
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "Committed %s.\n", plural(len(res.Offsets), "offset"))
			}
			return nil
		})
	})
	return cmd
}

func newGroupDeleteCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "delete GROUP", Aliases: []string{"rm"}, Short: "Delete a group with no active members, and its offsets", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		if _, err := c.do(ctx, apiRequest{method: http.MethodDelete, path: groupPath(args[0])}); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Deleted group %s.\n", args[0])
		return nil
	})
	return cmd
}

// withGroupConsume adds --group to the consume command: with it, consume
// joins the group as an HTTP member, prints what its polls return,
// commits after each printed batch and leaves at the end.
func withGroupConsume(g *globalFlags, cmd *cobra.Command) *cobra.Command {
	var group, reset string
	var session time.Duration
	cmd.Flags().StringVarP(&group, "group", "g", "", "consume as a member of this consumer group (committing offsets)")
	cmd.Flags().StringVar(&reset, "group-reset", "earliest", "with --group, where to start without a committed offset: earliest or latest")
	cmd.Flags().DurationVar(&session, "group-session-timeout", 30*time.Second, "with --group, how long the server keeps the member without a poll")
	plain := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if group == "" {
			return plain(cmd, args)
		}
		return runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
			f := cmd.Flags()
			max, _ := f.GetInt("max-records")
			follow, _ := f.GetBool("follow")
			enc, _ := f.GetString("encoding")
			wait, _ := f.GetDuration("wait")
			values, _ := f.GetBool("values")
			gc := &groupConsumer{c: c, group: group, topic: args[0], max: max, follow: follow, encoding: enc, wait: wait,
				reset: reset, session: session, values: values}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := gc.run(ctx, cmd.OutOrStdout())
			if err == nil || n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "Consumed %s as a member of group %s.\n", plural(n, "record"), group)
			}
			return err
		})(cmd, args)
	}
	return cmd
}

// groupConsumer is one HTTP member of a group.
type groupConsumer struct {
	c               *apiClient
	group, topic    string
	max             int
	follow          bool
	encoding, reset string
	wait, session   time.Duration
	values          bool // print only the values (consume --values)
	memberPath      string
}

type groupPoll struct {
	Rebalancing bool              `json:"rebalancing"`
	Records     []json.RawMessage `json:"records"`
}

func (gc *groupConsumer) run(ctx context.Context, w io.Writer) (int, error) {
	var join struct {
		MemberID string `json:"member_id"`
	}
	body := map[string]any{"topics": []string{gc.topic}, "client_id": "runnel-cli",
		"session_timeout_ms": gc.session.Milliseconds(), "auto_offset_reset": gc.reset}
	if _, err := gc.c.getJSON(ctx, apiRequest{method: http.MethodPost, path: groupPath(gc.group) + "/members", body: body, wait: gc.session}, &join); err != nil {
		return 0, err
	}
	gc.memberPath = groupPath(gc.group) + "/members/" + url.PathEscape(join.MemberID)
	defer func() {
		leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gc.c.do(leaveCtx, apiRequest{method: http.MethodDelete, path: gc.memberPath})
	}()
	out := bufio.NewWriter(w)
	n, empty := 0, 0
	for ctx.Err() == nil && (gc.max == 0 || n < gc.max) {
		wait := gc.wait
		if !gc.follow {
			wait = min(wait, time.Second)
		}
		q := url.Values{"wait_ms": {strconv.FormatInt(wait.Milliseconds(), 10)}, "max_records": {"500"}}
		if gc.max > 0 {
			q.Set("max_records", strconv.Itoa(min(500, gc.max-n)))
		}
		if gc.encoding != "" {
			q.Set("encoding", gc.encoding)
		}
		var p groupPoll
		if _, err := gc.c.getJSON(ctx, apiRequest{method: http.MethodGet, path: gc.memberPath + "/records", query: q, wait: wait}, &p); err != nil {
			if ctx.Err() != nil {
				return n, nil
			}
			return n, err
		}
		for _, rec := range p.Records {
			write := writeRecordLine
			if gc.values {
				write = writeValueLine
			}
			if err := write(out, rec); err != nil {
				return n, err
			}
			n++
		}
		if err := out.Flush(); err != nil {
			return n, fmt.Errorf("writing output: %w", err)
		}
		if len(p.Records) > 0 {
			empty = 0
			if _, err := gc.c.do(ctx, apiRequest{method: http.MethodPost, path: gc.memberPath + "/offsets"}); err != nil && ctx.Err() == nil {
				return n, err
			}
		} else if !p.Rebalancing {
			empty++
		}
		if !gc.follow && empty >= 2 {
			return n, nil // caught up
		}
	}
	return n, nil
}
