package main

// The client subcommands (topic, produce, consume, cluster) talk to a runnel
// server's REST API (openapi.yaml). File map:
//   client.go          global flags, command list, output helpers
//   client_http.go     apiClient: net/http + encoding/json, problem+json errors
//   client_topic.go    topic create|list|describe|delete|alter-config
//   client_produce.go  produce: line batching, progress bar, summary
//   client_consume.go  consume: one poller goroutine per partition, JSON lines
//   client_cluster.go  cluster: controllers and brokers tables
// Goroutines: only consume starts any (one per partition); it cancels and
// waits for all of them before returning.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// errBadOutput reports an unknown -o value.
var errBadOutput = errors.New("--output must be table or json")

const (
	outputTable = "table"
	outputJSON  = "json"
)

// globalFlags are the persistent flags shared by every client subcommand.
type globalFlags struct {
	Server  string        // REST API base URL
	Output  string        // "table" or "json"
	Timeout time.Duration // per-request timeout
	CAFile  string        // PEM CAs trusted for an https:// server, beside the system's
	// Credentials (client_auth.go).
	User, PasswordFile, Token string
}

// register adds the persistent flags to fs (the root command's persistent set).
func (g *globalFlags) register(fs *pflag.FlagSet) {
	server := os.Getenv("RUNNEL_SERVER")
	if server == "" {
		server = "http://localhost:8080"
	}
	fs.StringVar(&g.Server, "server", server, "runnel REST API URL (env RUNNEL_SERVER)")
	fs.StringVarP(&g.Output, "output", "o", outputTable, "output format: table or json")
	fs.DurationVar(&g.Timeout, "request-timeout", 30*time.Second, "timeout of one API request")
	fs.StringVar(&g.CAFile, "ca-file", os.Getenv("RUNNEL_CA_FILE"), "PEM CA certificate(s) to trust for an https:// --server, e.g. certs/ca.pem from `runnel certs create` (env RUNNEL_CA_FILE)")
	g.registerAuth(fs)
}

// client validates the flags and returns an API client.
func (g *globalFlags) client() (*apiClient, error) {
	if g.Output != outputTable && g.Output != outputJSON {
		return nil, fmt.Errorf("%w, not %q", errBadOutput, g.Output)
	}
	c, err := newAPIClient(g.Server, g.Timeout)
	if err != nil {
		return nil, err
	}
	if g.CAFile != "" {
		if err := c.trustCA(g.CAFile); err != nil {
			return nil, err
		}
	}
	if c.authorize, err = g.authorizer(); err != nil {
		return nil, err
	}
	return c, nil
}

func (g *globalFlags) json() bool { return g.Output == outputJSON }

// newClientCommands returns the client subcommands for the root command.
func newClientCommands(g *globalFlags) []*cobra.Command {
	return []*cobra.Command{
		newTopicCommand(g),
		newProduceCommand(g),
		withGroupConsume(g, newConsumeCommand(g)),
		newClusterCommand(g),
		newGroupCommand(g),
		newUserCommand(g),
		newACLCommand(g),
		newQuotaCommand(g),
		newTokenCommand(g),
	}
}

// runE adapts a command body: arguments have been parsed by the time it runs,
// so a failure is no longer a usage error and cobra should not print usage.
func runE(g *globalFlags, body func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := g.client()
		if err != nil {
			return err
		}
		cmd.SilenceUsage = true
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		return body(ctx, cmd, c, args)
	}
}

// writeJSON prints a raw JSON body indented, with a trailing newline.
func writeJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		// Not JSON after all (should not happen): print it as it came.
		buf.Reset()
		buf.Write(bytes.TrimSpace(raw))
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// show sends req and prints its answer: with -o json as the server sent
// it, else decoded into out and written by human (to the command's
// stdout, w).
func (g *globalFlags) show(ctx context.Context, cmd *cobra.Command, c *apiClient, req apiRequest, out any, human func(w io.Writer) error) error {
	raw, err := c.getJSON(ctx, req, out)
	if err != nil {
		return err
	}
	if g.json() {
		return writeJSON(cmd.OutOrStdout(), raw)
	}
	return human(cmd.OutOrStdout())
}

// writeValueJSON marshals v indented, with a trailing newline.
func writeValueJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding output: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// joinInts formats a replica list as "1,2,3".
func joinInts(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// plural is "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// orDash shows "-" for an empty cell so columns stay aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
