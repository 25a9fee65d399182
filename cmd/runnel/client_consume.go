package main

import (
	"bufio"
	"bytes"
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
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

const (
	offsetEarliest = "earliest"
	offsetLatest   = "latest"
	partitionAll   = "all"

	// Limits of the consume endpoint (openapi.yaml: max_records, wait_ms).
	maxFetchRecords = 10000
	maxWait         = 60 * time.Second
)

var (
	errBadPartition = errors.New("--partition must be a partition number or all")
	errBadOffset    = errors.New("--offset must be earliest, latest or an offset")
)

// consumeOptions are the consume command's flags.
type consumeOptions struct {
	partition string
	offset    string
	max       int
	follow    bool
	encoding  string
	wait      time.Duration
	fetchMax  int
	values    bool
}

// fetchResponse is GET /v1/topics/{topic}/partitions/{partition}/records.
// Records stay raw so that they are printed exactly as the server sent them.
type fetchResponse struct {
	Records       []json.RawMessage `json:"records"`
	NextOffset    int64             `json:"next_offset"`
	HighWatermark int64             `json:"high_watermark"`
}

func newConsumeCommand(g *globalFlags) *cobra.Command {
	o := consumeOptions{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records as JSON, one per line",
		Long: "Consume reads a topic's partitions from an offset and prints each record as one\n" +
			"line of JSON on stdout (-o does not apply), or with --values only the values,\n" +
			"one per line. A value is shown as JSON when it is JSON, as a string when it is\n" +
			"UTF-8 text and as base64 otherwise, as its value_encoding says (--encoding\n" +
			"forces one). Without --follow it stops at each partition's high watermark as of\n" +
			"its first fetch; with --follow it long-polls until interrupted (Ctrl-C),\n" +
			"retrying when the server is briefly unavailable. A count goes to stderr at the end.",
		Example: "  runnel consume orders -n 10\n  runnel consume orders -p 2 --offset 1000 -f\n" +
			"  seq 3 | runnel produce lines && runnel consume lines --values",
		Args: cobra.ExactArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&o.partition, "partition", "p", partitionAll, "partition number or all")
	f.StringVar(&o.offset, "offset", offsetEarliest, "where to start: earliest, latest or an offset")
	f.IntVarP(&o.max, "max-records", "n", 0, "stop after this many records (0: no limit)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep waiting for new records until interrupted")
	f.StringVar(&o.encoding, "encoding", "", "how keys and values are shown: string, json or base64 (default: the server's)")
	f.DurationVar(&o.wait, "wait", 5*time.Second, "long-poll wait of one request with --follow")
	f.IntVar(&o.fetchMax, "fetch-max", 500, "records asked for per request")
	f.BoolVar(&o.values, "values", false, "print only each record's value, one per line (text as it was produced)")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		part, all, err := parsePartitionArg(o.partition)
		if err != nil {
			return err
		}
		if err := o.validate(); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		parts := []int32{part}
		if all {
			if parts, err = topicPartitions(ctx, c, args[0]); err != nil {
				return err
			}
		}
		cs := &consumer{c: c, topic: args[0], opts: o, warnW: cmd.ErrOrStderr()}
		n, err := cs.run(ctx, parts, cmd.OutOrStdout())
		if err == nil || n > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "Consumed %s.\n", plural(n, "record"))
		}
		return err
	})
	return cmd
}

func (o consumeOptions) validate() error {
	if _, err := parseStartOffset(o.offset); err != nil {
		return err
	}
	if o.max < 0 {
		return fmt.Errorf("--max-records must not be negative, not %d", o.max)
	}
	if o.fetchMax < 1 || o.fetchMax > maxFetchRecords {
		return fmt.Errorf("--fetch-max must be between 1 and %d, not %d", maxFetchRecords, o.fetchMax)
	}
	if o.wait < 0 || o.wait > maxWait {
		return fmt.Errorf("--wait must be between 0 and %s, not %s", maxWait, o.wait)
	}
	switch o.encoding {
	case "", encodingString, encodingJSON, encodingBase64:
		return nil
	}
	return fmt.Errorf("%w, not %q", errBadEncoding, o.encoding)
}

// parsePartitionArg reads "all" or a partition number.
func parsePartitionArg(s string) (part int32, all bool, err error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, partitionAll) {
		return 0, true, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%w, not %q", errBadPartition, s)
	}
	return int32(n), false, nil
}

// parseStartOffset normalises "earliest", "latest" or a non-negative offset
// into the value of the offset query parameter.
func parseStartOffset(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == offsetEarliest || s == offsetLatest {
		return s, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return "", fmt.Errorf("%w, not %q", errBadOffset, s)
	}
	return strconv.FormatInt(n, 10), nil
}

// topicPartitions lists a topic's partition numbers.
func topicPartitions(ctx context.Context, c *apiClient, topic string) ([]int32, error) {
	var d topicDetail
	if _, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: topicPath(topic)}, &d); err != nil {
		return nil, err
	}
	parts := make([]int32, 0, len(d.Partitions))
	for _, p := range d.Partitions {
		parts = append(parts, p.Partition)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", topic)
	}
	return parts, nil
}

// consumer fetches partitions concurrently and prints their records.
type consumer struct {
	c     *apiClient
	topic string
	opts  consumeOptions

	warnMu sync.Mutex // serialises the pollers' writes to warnW
	warnW  io.Writer  // stderr: retry warnings
}

func (cs *consumer) warn(format string, args ...any) {
	cs.warnMu.Lock()
	defer cs.warnMu.Unlock()
	fmt.Fprintf(cs.warnW, format, args...)
}

// run starts one poller goroutine per partition and prints what they fetch
// until every poller is done, --max-records is reached or ctx ends. It
// cancels and waits for all pollers before returning the count printed.
// An interruption (ctx cancelled) is not an error.
func (cs *consumer) run(ctx context.Context, parts []int32, w io.Writer) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []json.RawMessage)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cs.poll(ctx, p, batches); err != nil && ctx.Err() == nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	go func() { wg.Wait(); close(batches) }()

	out := bufio.NewWriter(w)
	n, werr := 0, error(nil)
	for batch := range batches {
		if werr != nil || (cs.opts.max > 0 && n >= cs.opts.max) {
			continue // draining until the pollers stop
		}
		for _, rec := range batch {
			write := writeRecordLine
			if cs.opts.values {
				write = writeValueLine
			}
			if werr = write(out, rec); werr != nil {
				break
			}
			n++
			if cs.opts.max > 0 && n >= cs.opts.max {
				break
			}
		}
		if werr == nil {
			werr = out.Flush()
		}
		if werr != nil || (cs.opts.max > 0 && n >= cs.opts.max) {
			cancel()
		}
	}
	if werr != nil {
		return n, fmt.Errorf("writing output: %w", werr)
	}
	return n, firstErr
}

// writeRecordLine writes rec as compact JSON and a newline.
func writeRecordLine(w *bufio.Writer, rec json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, rec); err != nil {
		return fmt.Errorf("record is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// writeValueLine writes rec's value alone: a string as its text, JSON as
// compact JSON, base64 as it came, a null value as an empty line.
func writeValueLine(w *bufio.Writer, rec json.RawMessage) error {
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(rec, &r); err != nil {
		return fmt.Errorf("record is not JSON: %w", err)
	}
	var text string
	switch v := bytes.TrimSpace(r.Value); {
	case len(v) == 0 || string(v) == "null":
	case v[0] == '"':
		if err := json.Unmarshal(v, &text); err != nil {
			return fmt.Errorf("record value: %w", err)
		}
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return fmt.Errorf("record value: %w", err)
		}
		text = buf.String()
	}
	_, err := w.WriteString(text + "\n")
	return err
}

// poll fetches one partition from the start offset, sending each non-empty
// batch to out, until it reaches the high watermark of its first fetch
// (without --follow) or ctx ends.
func (cs *consumer) poll(ctx context.Context, part int32, out chan<- []json.RawMessage) error {
	offset, _ := parseStartOffset(cs.opts.offset) // validated by the caller
	stopAt := int64(-1)
	for {
		start := time.Now()
		resp, err := cs.fetchRetrying(ctx, part, offset)
		if err != nil {
			return err
		}
		if stopAt < 0 {
			stopAt = resp.HighWatermark
		}
		next := nextOffset(resp)
		if len(resp.Records) > 0 {
			select {
			case out <- resp.Records:
			case <-ctx.Done():
				return nil
			}
		}
		prev := offset
		offset = strconv.FormatInt(next, 10)
		if !cs.opts.follow {
			if next >= stopAt || (len(resp.Records) == 0 && offset == prev) {
				return nil
			}
			continue
		}
		if len(resp.Records) == 0 && time.Since(start) < 100*time.Millisecond {
			// The server answered an empty long poll at once: do not spin.
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// nextOffset is where to continue: one past the last record returned, or the
// server's next_offset when there was none. Continuing right after the last
// record is always safe (the server returns the first record at or after the
// offset asked for), and it cannot skip records should a server report a
// next_offset beyond records it left out of a full response.
func nextOffset(resp fetchResponse) int64 {
	if n := len(resp.Records); n > 0 {
		var last struct {
			Offset *int64 `json:"offset"`
		}
		if json.Unmarshal(resp.Records[n-1], &last) == nil && last.Offset != nil {
			return *last.Offset + 1
		}
	}
	return resp.NextOffset
}

// fetchRetrying is fetch that, with --follow, rides out a server that is
// briefly unreachable or unavailable (restart, leader change): it retries
// with a growing pause, up to retryFor in total since the last success.
func (cs *consumer) fetchRetrying(ctx context.Context, part int32, offset string) (fetchResponse, error) {
	const retryFor = 2 * time.Minute
	pause, first := 100*time.Millisecond, time.Now()
	for {
		resp, err := cs.fetch(ctx, part, offset)
		if err == nil || !cs.opts.follow || !retryable(err) || time.Since(first) > retryFor || ctx.Err() != nil {
			return resp, err
		}
		if pause == 100*time.Millisecond {
			cs.warn("partition %d: %v; retrying\n", part, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return resp, err
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// retryable reports whether err may go away by itself: no response at all, or
// a 5xx or 429 problem.
func retryable(err error) bool {
	var p *problemError
	if errors.As(err, &p) {
		return p.Status >= 500 || p.Status == http.StatusTooManyRequests
	}
	return true
}

// fetch asks for one partition's records from offset.
func (cs *consumer) fetch(ctx context.Context, part int32, offset string) (fetchResponse, error) {
	limit := cs.opts.fetchMax
	if cs.opts.max > 0 {
		limit = min(limit, cs.opts.max)
	}
	q := url.Values{
		"offset":      {offset},
		"max_records": {strconv.Itoa(limit)},
	}
	var wait time.Duration
	if cs.opts.follow && cs.opts.wait > 0 {
		wait = cs.opts.wait
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	if cs.opts.encoding != "" {
		q.Set("encoding", cs.opts.encoding)
	}
	var resp fetchResponse
	_, err := cs.c.getJSON(ctx, apiRequest{
		method: http.MethodGet,
		path:   fmt.Sprintf("%s/partitions/%d/records", topicPath(cs.topic), part),
		query:  q,
		wait:   wait,
	}, &resp)
	return resp, err
}
