package httpdoor

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/broker/producers"

	"github.com/runnel/runnel/recordbatch"
)

// HTTP clients may talk to any node. A produce or consume for a partition
// led by another broker is forwarded to that broker over its public HTTP
// API (base64 encoding, explicit partitions), one hop at most: a forwarded
// request is marked, and a node that receives one for a partition it does
// not lead answers not-leader instead of forwarding again.

const forwardedHeader = "X-Runnel-Forwarded"

type forwardedKey struct{}

// MarkForwarded records in the request context whether the request was
// forwarded by another node. Only requests that came over the inter-node
// port count: a client cannot set the header on the public port to change
// how its request is routed.
func MarkForwarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inter, _ := r.Context().Value(interNodeKey{}).(bool); inter && r.Header.Get(forwardedHeader) != "" {
			ctx := context.WithValue(r.Context(), forwardedKey{}, true)
			r = r.WithContext(producers.WithForwardedKey(ctx, r.Header.Get(producers.KeyHeader)))
		}
		next.ServeHTTP(w, r)
	})
}

// IsForwarded: the request was forwarded by another node (MarkForwarded).
func IsForwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// Forwarder sends HTTP requests to other nodes over the inter-node port.
// Safe for concurrent use.
//
// It owns the connections it dials: its transport keeps them idle between
// requests (and runs two goroutines on each), and Close closes every one,
// so a stopped node holds no socket on its peers.
type Forwarder struct {
	client    *http.Client
	transport *http.Transport

	mu     sync.Mutex // guards conns and closed; held for no I/O
	conns  map[*forwardConn]struct{}
	closed bool
}

// errForwarderClosed is the dial error of a closed forwarder: the node is
// stopping.
var errForwarderClosed = errors.New("forward: the node is shutting down")

// Forwarded requests travel between nodes over the raft port (protoHTTP),
// the one address nodes are sure to reach each other on, whatever they
// advertise to clients. A URL host "runnel-node-<id>" names a node.
const nodeHostPrefix = "runnel-node-"

// NodeHost is the URL host that names node id to the Forwarder.
func NodeHost(id int32) string { return nodeHostPrefix + strconv.Itoa(int(id)) }

// NewForwarder dials node hosts with dialNode and anything else directly.
func NewForwarder(dialNode func(ctx context.Context, id int32) (net.Conn, error)) *Forwarder {
	var direct net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && strings.HasPrefix(host, nodeHostPrefix) {
			id, err := strconv.ParseInt(strings.TrimPrefix(host, nodeHostPrefix), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("forward: bad node host %q", host)
			}
			return dialNode(ctx, int32(id))
		}
		return direct.DialContext(ctx, network, addr)
	}
	f := &Forwarder{conns: map[*forwardConn]struct{}{}}
	f.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return f.track(c)
		},
		MaxIdleConnsPerHost: 32, IdleConnTimeout: time.Minute,
	}
	f.client = &http.Client{Transport: f.transport}
	return f
}

// track registers a new connection, or closes it when the forwarder has
// closed meanwhile.
func (f *Forwarder) track(c net.Conn) (net.Conn, error) {
	fc := &forwardConn{Conn: c, f: f}
	f.mu.Lock()
	closed := f.closed
	if !closed {
		f.conns[fc] = struct{}{}
	}
	f.mu.Unlock()
	if closed {
		c.Close()
		return nil, errForwarderClosed
	}
	return fc, nil
}

// Close closes every connection the forwarder opened, idle or not, and
// refuses to dial again; a request still in flight fails. The server calls
// it once nothing forwards any more (its HTTP servers and coordinators
// stopped). The transport's goroutines on a connection end when it closes.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[*forwardConn]struct{}{}
	f.mu.Unlock()
	f.transport.CloseIdleConnections()
	for c := range conns {
		c.Close()
	}
}

// forwardConn is a connection of the forwarder, which forgets it when the
// transport closes it.
type forwardConn struct {
	net.Conn
	f    *Forwarder
	once sync.Once
}

func (c *forwardConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}

type wireOutRecord struct {
	Partition int32              `json:"partition"`
	Key       *string            `json:"key"`
	Value     *string            `json:"value"`
	Headers   map[string]*string `json:"headers,omitempty"`
	Timestamp *int64             `json:"timestamp,omitempty"`
}

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func unb64(s *string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(*s)
}

// produce appends records (all for one partition) on the broker at addr and
// returns the base offset.
func (f *Forwarder) produce(ctx context.Context, addr, topic string, part int32, recs []recordbatch.NewRecord, acks int, k *producers.Key) (int64, error) {
	out := make([]wireOutRecord, len(recs))
	for i, r := range recs {
		ts := r.Timestamp
		out[i] = wireOutRecord{Partition: part, Key: b64(r.Key), Value: b64(r.Value), Timestamp: &ts}
		if len(r.Headers) > 0 {
			out[i].Headers = map[string]*string{}
			for _, h := range r.Headers {
				out[i].Headers[h.Key] = b64(h.Value)
			}
		}
	}
	body, err := json.Marshal(map[string]any{"records": out})
	if err != nil {
		return 0, err
	}
	q := url.Values{"encoding": {"base64"}, "acks": {acksParam(acks)}}
	u := "http://" + addr + "/v1/topics/" + url.PathEscape(topic) + "/records?" + q.Encode()
	var res struct {
		Offsets []api.RecordOffset `json:"offsets"`
	}
	var hdr http.Header
	if k != nil {
		hdr = http.Header{producers.KeyHeader: {k.String()}}
	}
	if err := f.doWith(ctx, http.MethodPost, u, body, hdr, &res); err != nil {
		return 0, err
	}
	if len(res.Offsets) != len(recs) {
		return 0, fmt.Errorf("forward produce to %s: %d offsets for %d records", addr, len(res.Offsets), len(recs))
	}
	return res.Offsets[0].Offset, nil
}

func acksParam(acks int) string {
	if acks == api.AcksAll {
		return "all"
	}
	return strconv.Itoa(acks)
}

// Consume reads one partition on the broker at addr (a NodeHost).
func (f *Forwarder) Consume(ctx context.Context, addr string, req api.ConsumeRequest) (api.ConsumeResult, error) {
	q := url.Values{"encoding": {"base64"}}
	switch {
	case req.Timestamp != nil:
		q.Set("timestamp", strconv.FormatInt(*req.Timestamp, 10))
	case req.Offset == api.OffsetEarliest:
		q.Set("offset", "earliest")
	case req.Offset == api.OffsetLatest:
		q.Set("offset", "latest")
	default:
		q.Set("offset", strconv.FormatInt(req.Offset, 10))
	}
	q.Set("max_records", strconv.Itoa(req.MaxRecords))
	q.Set("max_bytes", strconv.Itoa(req.MaxBytes))
	q.Set("wait_ms", strconv.FormatInt(req.Wait.Milliseconds(), 10))
	if req.ReadUncommitted {
		q.Set("isolation", "read_uncommitted")
		if req.IncludeControl {
			q.Set("include_control", "true")
		}
	}
	u := fmt.Sprintf("http://%s/v1/topics/%s/partitions/%d/records?%s", addr, url.PathEscape(req.Topic), req.Partition, q.Encode())
	var res struct {
		Records []struct {
			Offset    int64              `json:"offset"`
			Timestamp int64              `json:"timestamp"`
			Key       *string            `json:"key"`
			Value     *string            `json:"value"`
			Headers   map[string]*string `json:"headers"`
			// HeaderList is every header in order (the headers object
			// loses repeated and binary names); older nodes send none.
			HeaderList []struct {
				Key         string  `json:"key"`
				Value       *string `json:"value"`
				KeyEncoding string  `json:"key_encoding"`
			} `json:"header_list"`
			Transactional bool               `json:"transactional"`
			Control       *api.ControlMarker `json:"control"`
		} `json:"records"`
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
		StartOffset   int64 `json:"start_offset"`
	}
	if err := f.do(ctx, http.MethodGet, u, nil, &res); err != nil {
		return api.ConsumeResult{}, err
	}
	out := api.ConsumeResult{NextOffset: res.NextOffset, HighWatermark: res.HighWatermark, StartOffset: res.StartOffset}
	for _, r := range res.Records {
		cr := api.ConsumedRecord{Partition: req.Partition, Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp),
			Transactional: r.Transactional, Control: r.Control}
		var err error
		if cr.Key, err = unb64(r.Key); err == nil {
			cr.Value, err = unb64(r.Value)
		}
		for _, h := range r.HeaderList {
			k, kerr := []byte(h.Key), error(nil)
			if h.KeyEncoding == api.EncodingBase64 {
				k, kerr = base64.StdEncoding.DecodeString(h.Key)
			}
			hv, herr := unb64(h.Value) // encoding=base64: every value is base64
			err = errors.Join(err, kerr, herr)
			cr.Headers = append(cr.Headers, api.Header{Key: string(k), Value: hv})
		}
		if r.HeaderList == nil {
			for k, v := range r.Headers {
				hv, herr := unb64(v)
				err = errors.Join(err, herr)
				cr.Headers = append(cr.Headers, api.Header{Key: k, Value: hv})
			}
		}
		if err != nil {
			return api.ConsumeResult{}, fmt.Errorf("forward consume from %s: %w", addr, err)
		}
		out.Records = append(out.Records, cr)
	}
	return out, nil
}

// do sends one forwarded request; a problem answer becomes the api sentinel
// of its type, so the client sees the leader's error as if local.
func (f *Forwarder) do(ctx context.Context, method, u string, body []byte, out any) error {
	return f.doWith(ctx, method, u, body, nil, out)
}

// doWith is do with extra request headers.
func (f *Forwarder) doWith(ctx context.Context, method, u string, body []byte, hdr http.Header, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set(forwardedHeader, "1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: forward to the partition leader: %v", api.ErrNotLeader, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("forward to the partition leader: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var p api.Problem
		json.Unmarshal(raw, &p)
		for _, k := range api.ProblemKinds() {
			if k.Type == p.Type && k.Err != nil {
				err := fmt.Errorf("%w: %s (from the partition leader)", k.Err, p.Detail)
				return withBatchPosition(err, p)
			}
		}
		return fmt.Errorf("forward to the partition leader: status %d: %s", resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// withBatchPosition keeps the batch a leader's corrupt-batch problem names.
func withBatchPosition(err error, p api.Problem) error {
	if p.Offset == nil || p.Partition == nil {
		return err
	}
	cb := &api.CorruptBatchError{Topic: p.Topic, Partition: *p.Partition, Offset: *p.Offset, NextOffset: -1, Err: err}
	if p.NextOffset != nil {
		cb.NextOffset = *p.NextOffset
	}
	return cb
}
