package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

const (
	encodingString = "string"
	encodingJSON   = "json"
	encodingBase64 = "base64"

	// maxLineBytes is the longest input line produce accepts.
	maxLineBytes = 16 << 20
	// maxBatchBytes closes a batch early when its values grow large, so one
	// request stays well under any server body limit.
	maxBatchBytes = 4 << 20
)

var (
	errBadEncoding = errors.New("--encoding must be string, json or base64")
	errNoKeySep    = errors.New("line has no key separator")
)

// produceOptions are the produce command's flags.
type produceOptions struct {
	file       string
	keySep     string
	partition  int32 // -1: let the key choose
	encoding   string
	batchSize  int
	noProgress bool
	acks       string // "": the server's default
}

func (o produceOptions) validate() error {
	switch o.encoding {
	case encodingString, encodingJSON, encodingBase64:
	default:
		return fmt.Errorf("%w, not %q", errBadEncoding, o.encoding)
	}
	if o.batchSize < 1 {
		return fmt.Errorf("--batch-size must be at least 1, not %d", o.batchSize)
	}
	switch o.acks {
	case "", "0", "1", "all", "-1":
	default:
		return fmt.Errorf("--acks must be 0, 1 or all, not %q", o.acks)
	}
	if o.partition < -1 {
		return fmt.Errorf("--partition must be a partition number, not %d", o.partition)
	}
	return nil
}

// produceRecord is one record of the produce request body. The CLI's own:
// the value travels as the raw JSON it read (the api package decodes it
// server-side, the generated client would re-encode it).
type produceRecord struct {
	Key       *string         `json:"key,omitempty"`
	Value     json.RawMessage `json:"value"`
	Partition *int32          `json:"partition,omitempty"`
}

type produceRequest struct {
	Records []produceRecord `json:"records"`
}

// produceResponse is the reply to POST /v1/topics/{topic}/records (the api
// package's).
type produceResponse = api.ProduceResponse

func newProduceCommand(g *globalFlags) *cobra.Command {
	o := produceOptions{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per input line (stdin or a file)",
		Long: "Produce reads lines from stdin or --file and sends each non-empty line as one\n" +
			"record, in batches. With --key-sep the text before the first separator is the key.",
		Example: "  printf 'k1:hello\\nk2:world\\n' | runnel produce orders --key-sep :\n" +
			"  runnel produce events -i events.ndjson --encoding json",
		Args: cobra.ExactArgs(1),
	}
	f := cmd.Flags()
	// -i, not -f: consume's -f is --follow, as in tail -f.
	f.StringVarP(&o.file, "file", "i", "", "read lines from this file instead of stdin (\"-\": stdin)")
	f.StringVar(&o.keySep, "key-sep", "", "split each line at the first SEP into key and value")
	f.Int32Var(&o.partition, "partition", -1, "send every record to this partition; -1: chosen by the key")
	f.StringVar(&o.encoding, "encoding", encodingString, "how lines are read: string, json (each value is a JSON document) or base64")
	f.IntVar(&o.batchSize, "batch-size", 500, "records per request")
	f.StringVar(&o.acks, "acks", "", "acknowledgement level: 0, 1 or all (default: the server's, all)")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw a progress bar for file input")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		in, size, closeIn, err := openInput(o.file, cmd.InOrStdin())
		if err != nil {
			return err
		}
		defer closeIn()
		p := &producer{c: c, topic: args[0], opts: o, parts: map[int32]*partitionSummary{}}
		if size > 0 && !o.noProgress {
			p.bar = newProgressBar(cmd.ErrOrStderr(), size)
		}
		start := time.Now()
		runErr := p.run(ctx, in)
		sum := p.summary(time.Since(start))
		if runErr != nil && sum.Records > 0 {
			return fmt.Errorf("%w (%d records were written before the failure)", runErr, sum.Records)
		}
		if runErr != nil {
			return runErr
		}
		if g.json() {
			return writeValueJSON(cmd.OutOrStdout(), sum)
		}
		return writeProduceSummary(cmd.OutOrStdout(), sum)
	})
	return cmd
}

// openInput opens file (or returns stdin for "" and "-") and its size when it
// is a regular file, 0 otherwise.
func openInput(file string, stdin io.Reader) (io.Reader, int64, func(), error) {
	if file == "" || file == "-" {
		return stdin, 0, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w", err)
	}
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return f, size, func() { f.Close() }, nil
}

// producer sends lines in batches and tallies what the server acknowledged.
// It is used by one goroutine.
type producer struct {
	c     *apiClient
	topic string
	opts  produceOptions
	bar   *progressBar

	batches int
	bytes   int64 // input bytes consumed, newlines included
	parts   map[int32]*partitionSummary
}

// run reads r to the end, sending a request every batchSize records.
func (p *producer) run(ctx context.Context, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var (
		batch      []produceRecord
		batchBytes int
		lineNo     int
	)
	for sc.Scan() {
		lineNo++
		line := sc.Bytes()
		p.bytes += int64(len(line)) + 1
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		rec, err := buildRecord(line, p.opts)
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		batch = append(batch, rec)
		batchBytes += len(rec.Value)
		if len(batch) >= p.opts.batchSize || batchBytes >= maxBatchBytes {
			if err := p.send(ctx, batch); err != nil {
				return err
			}
			batch, batchBytes = batch[:0], 0
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading input after line %d: %w", lineNo, err)
	}
	if len(batch) > 0 {
		if err := p.send(ctx, batch); err != nil {
			return err
		}
	}
	p.bar.finish(p.bytes, p.records())
	return nil
}

// send posts one batch and records the returned offsets.
func (p *producer) send(ctx context.Context, batch []produceRecord) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("produce interrupted: %w", err)
	}
	q := url.Values{"encoding": {p.opts.encoding}}
	if p.opts.acks != "" {
		q.Set("acks", p.opts.acks)
	}
	var resp produceResponse
	_, err := p.c.getJSON(ctx, apiRequest{
		method: http.MethodPost,
		path:   topicPath(p.topic) + "/records",
		query:  q,
		body:   produceRequest{Records: batch},
	}, &resp)
	if err != nil {
		return err
	}
	p.batches++
	for _, o := range resp.Offsets {
		ps := p.parts[o.Partition]
		if ps == nil {
			ps = &partitionSummary{Partition: o.Partition, FirstOffset: o.Offset, LastOffset: o.Offset}
			p.parts[o.Partition] = ps
		}
		ps.Records++
		ps.FirstOffset = min(ps.FirstOffset, o.Offset)
		ps.LastOffset = max(ps.LastOffset, o.Offset)
	}
	p.bar.update(p.bytes, p.records())
	return nil
}

func (p *producer) records() int64 {
	var n int64
	for _, ps := range p.parts {
		n += ps.Records
	}
	return n
}

// buildRecord turns one input line into a record per the options.
func buildRecord(line []byte, o produceOptions) (produceRecord, error) {
	var rec produceRecord
	if o.keySep != "" {
		k, v, ok := bytes.Cut(line, []byte(o.keySep))
		if !ok {
			return rec, fmt.Errorf("%w %q", errNoKeySep, o.keySep)
		}
		if o.encoding == encodingBase64 {
			if _, err := base64.StdEncoding.DecodeString(string(k)); err != nil {
				return rec, fmt.Errorf("key is not valid base64: %w", err)
			}
		}
		key := string(k)
		rec.Key, line = &key, v
	}
	if o.partition >= 0 {
		part := o.partition
		rec.Partition = &part
	}
	switch o.encoding {
	case encodingJSON:
		if !json.Valid(line) {
			return rec, errors.New("value is not valid JSON (use --encoding string for plain text)")
		}
		rec.Value = append(json.RawMessage(nil), line...)
	case encodingBase64:
		if _, err := base64.StdEncoding.DecodeString(string(line)); err != nil {
			return rec, fmt.Errorf("value is not valid base64: %w", err)
		}
		fallthrough
	default:
		b, err := json.Marshal(string(line))
		if err != nil {
			return rec, fmt.Errorf("encoding value: %w", err)
		}
		rec.Value = b
	}
	return rec, nil
}

// partitionSummary tallies the acknowledged records of one partition.
type partitionSummary struct {
	Partition   int32 `json:"partition"`
	Records     int64 `json:"records"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
}

// produceSummary is what produce prints at the end.
type produceSummary struct {
	Topic      string             `json:"topic"`
	Records    int64              `json:"records"`
	Batches    int                `json:"batches"`
	Bytes      int64              `json:"bytes"`
	ElapsedMS  int64              `json:"elapsed_ms"`
	Partitions []partitionSummary `json:"partitions"`
}

func (p *producer) summary(elapsed time.Duration) produceSummary {
	s := produceSummary{Topic: p.topic, Batches: p.batches, Bytes: p.bytes, ElapsedMS: elapsed.Milliseconds()}
	s.Partitions = make([]partitionSummary, 0, len(p.parts))
	for _, ps := range p.parts {
		s.Partitions = append(s.Partitions, *ps)
		s.Records += ps.Records
	}
	sort.Slice(s.Partitions, func(i, j int) bool { return s.Partitions[i].Partition < s.Partitions[j].Partition })
	return s
}

// writeProduceSummary prints one line of totals and a per-partition table.
func writeProduceSummary(w io.Writer, s produceSummary) error {
	rate := ""
	if s.ElapsedMS > 0 {
		rate = fmt.Sprintf(", %.0f records/s", float64(s.Records)*1000/float64(s.ElapsedMS))
	}
	fmt.Fprintf(w, "Produced %d records (%s) to topic %q in %d batches, %s%s.\n",
		s.Records, formatBytes(s.Bytes), s.Topic, s.Batches,
		(time.Duration(s.ElapsedMS) * time.Millisecond).String(), rate)
	if len(s.Partitions) == 0 {
		return nil
	}
	t := newTable(w, "PARTITION", "RECORDS", "FIRST OFFSET", "LAST OFFSET")
	for _, p := range s.Partitions {
		t.row(fmt.Sprint(p.Partition), fmt.Sprint(p.Records), fmt.Sprint(p.FirstOffset), fmt.Sprint(p.LastOffset))
	}
	return t.flush()
}

// formatBytes prints n with a binary unit: "512 B", "1.5 KiB", "12.0 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
