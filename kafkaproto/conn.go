package kafkaproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Framing errors; each closes the connection it happened on.
var (
	errFrameTooLarge = errors.New("kafkaproto: request frame too large")
	errFrameTooSmall = errors.New("kafkaproto: request frame too small")
	errBadHeader     = errors.New("kafkaproto: malformed request header")
	errUnknownAPI    = errors.New("kafkaproto: unknown api key")
	errBadVersion    = errors.New("kafkaproto: api version not decodable")
	errBadBody       = errors.New("kafkaproto: malformed request body")
)

const (
	minFrame   = 10       // key, version, correlation id, client id length
	readChunk  = 64 << 10 // frame buffers grow by at most this per read
	keepBuffer = 1 << 20  // a connection keeps frame and response buffers up to this size
)

// header is a parsed request header (v1 or v2).
type header struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// conn is one client connection, served by two goroutines: serveConn reads
// and handles requests strictly in order, as Kafka does, so pipelined
// produce requests append in the order they were sent; writeLoop
// (pipeline.go) writes the responses in the same order, and holds the
// acks=all replication waits so that reading goes on meanwhile. They share
// only the jobs channel; out is the writer's alone.
type conn struct {
	s     *Server
	nc    net.Conn
	br    *bufio.Reader
	in    []byte // frame buffer, reused between requests
	out   []byte // response buffer, reused between responses; the writer's
	state connState
	jobs  chan<- writeJob // responses for writeLoop
	// mutedUntil: no request is read before it (a quota throttle; quotas.go).
	mutedUntil time.Time
	act        *activity // what it is doing, for a slow Close's log
}

func (s *Server) serveConn(nc net.Conn, d door, act *activity) {
	c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, readChunk), act: act}
	c.state.door, c.state.peerID = d, -1
	_, c.state.tls = nc.(*tls.Conn)
	if pc, ok := nc.(PeerConn); ok && d == peerDoor {
		c.state.peerID = pc.PeerNodeID()
	}
	defer func() {
		// A bug in a handler or the broker costs this connection, not the
		// process (as in net/http).
		if r := recover(); r != nil {
			s.log.Error("panic serving kafka connection", "remote", nc.RemoteAddr().String(),
				"panic", r, "stack", string(debug.Stack()))
		}
	}()
	// Responses are written by writeLoop, in order; see pipeline.go. When
	// reading ends, pending replication waits are cut short.
	wctx, cancel := context.WithCancel(s.ctx)
	jobs := make(chan writeJob, maxPipelined)
	written := make(chan struct{})
	c.jobs = jobs
	go c.writeLoop(wctx, jobs, written)
	defer func() {
		cancel()
		close(jobs)
		act.set(phaseDraining, -1)
		<-written
	}()
	defer func() {
		act.set(phaseEndingSession, -1)
		c.state.endSession() // its partitions stop calling it
	}()
	for {
		c.waitMuted()
		act.set(phaseReading, -1)
		frame, err := c.readFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && s.ctx.Err() == nil {
				s.log.Info("closing kafka connection", "remote", nc.RemoteAddr().String(), "err", err)
			}
			return
		}
		if err := c.handle(frame); err != nil {
			if s.ctx.Err() == nil {
				s.log.Info("closing kafka connection", "remote", nc.RemoteAddr().String(), "err", err)
			}
			return
		}
	}
}

// enqueue hands a response to the writer (or, on a conn without one, writes
// it now).
func (c *conn) enqueue(job writeJob) error {
	if c.jobs == nil {
		if job.acks != nil {
			job.acks.finish(c.s.ctx)
		}
		return c.write(job.h, job.resp, job.flexible)
	}
	c.jobs <- job
	return nil
}

// readFrame reads one size-prefixed request frame. The buffer grows as bytes
// arrive, so a frame that only claims to be large costs nothing.
func (c *conn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IdleTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < minFrame {
		return nil, fmt.Errorf("%w: %d bytes", errFrameTooSmall, n)
	}
	key, err := c.br.Peek(2)
	if err != nil {
		return nil, err
	}
	if limit := c.s.frameLimit(int16(binary.BigEndian.Uint16(key))); n > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, limit)
	}
	if n > keepBuffer {
		return c.readLargeFrame(n)
	}
	buf := c.in[:0]
	for len(buf) < n {
		want := min(n, len(buf)+max(len(buf), readChunk))
		if cap(buf) < want {
			grown := make([]byte, len(buf), want)
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(c.br, buf[len(buf):want])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, fmt.Errorf("kafkaproto: reading %d byte frame: %w", n, err)
		}
	}
	c.in = buf
	return buf, nil
}

// frameBlocks holds the readChunk-sized blocks readLargeFrame reads into
// (the pool lets the collector take them back).
var frameBlocks = sync.Pool{New: func() any { return new([readChunk]byte) }}

// readLargeFrame reads a frame of n bytes, more than a connection keeps
// (only Produce may be that large). Until half of it has arrived it goes
// into pooled blocks; then into one array of n bytes, which the rest is
// read into directly. So the frame is allocated once, and as before no
// more is allocated than twice what arrived: grown by doubling from
// readChunk, a 15 MB frame cost 32 MB of arrays, and the produce requests
// of ~190,000 partitions after a kill -9 at 300,000 partitions were 40 MB
// of what a survivor allocated in 40 s (issue 19). The array is the
// request's alone: it is not kept for the next frame.
func (c *conn) readLargeFrame(n int) ([]byte, error) {
	blocks := make([]*[readChunk]byte, 0, n/2/readChunk+1)
	defer func() {
		for _, b := range blocks {
			frameBlocks.Put(b)
		}
	}()
	got := 0
	for 2*got < n {
		b := frameBlocks.Get().(*[readChunk]byte)
		blocks = append(blocks, b)
		m, err := io.ReadFull(c.br, b[:min(readChunk, n-got)])
		got += m
		if err != nil {
			return nil, fmt.Errorf("kafkaproto: reading %d byte frame: %w", n, err)
		}
	}
	buf := make([]byte, n)
	at := 0
	for _, b := range blocks {
		at += copy(buf[at:got], b[:])
	}
	if _, err := io.ReadFull(c.br, buf[got:]); err != nil {
		return nil, fmt.Errorf("kafkaproto: reading %d byte frame: %w", n, err)
	}
	return buf, nil
}

// frameLimit is the largest frame accepted for an API key.
func (s *Server) frameLimit(key int16) int {
	if key == produceKey {
		return int(s.opts.MaxRequestSize)
	}
	return int(min(s.opts.MaxRequestSize, smallRequestMax))
}

// parseHeader splits a frame into the fixed part of its header (request
// header v1) and the rest; for flexible versions the rest starts with the
// header's tagged fields (v2), which handle skips.
func parseHeader(frame []byte) (header, []byte, error) {
	var h header
	if len(frame) < minFrame {
		return h, nil, errBadHeader
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	rest := frame[minFrame:]
	if idLen >= 0 {
		if idLen > len(rest) {
			return h, nil, errBadHeader
		}
		id := string(rest[:idLen])
		h.clientID = &id
		rest = rest[idLen:]
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)) {
		return nil, errBadHeader
	}
	b = b[l:]
	for range n {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errBadHeader
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || size > uint64(len(b)-l) {
			return nil, errBadHeader
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// handle decodes one frame, runs its handler and writes the response. An
// error means the connection must be closed.
func (c *conn) handle(frame []byte) error {
	h, body, err := parseHeader(frame)
	if err != nil {
		return err
	}
	api, ok := c.s.handlers[h.key]
	if !ok {
		return fmt.Errorf("%w %d", errUnknownAPI, h.key)
	}
	if err := c.checkAuth(h.key); err != nil {
		return err
	}
	c.act.set(phaseHandling, h.key)
	supported := h.version >= api.Min && h.version <= api.Max
	if h.key == apiVersionsKey && !supported {
		// Answer in v0 so that the client can pick a version it shares.
		resp := c.s.apiVersionsError(kerr.UnsupportedVersion.Code)
		return c.enqueue(writeJob{h: h, resp: resp})
	}
	req := kmsg.RequestForKey(h.key)
	if h.version < 0 || h.version > req.MaxVersion() {
		return fmt.Errorf("%w: key %d version %d", errBadVersion, h.key, h.version)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %s v%d: %v", errBadBody, kmsg.NameForKey(h.key), h.version, err)
	}
	var resp kmsg.Response
	var acks *ackWaits
	start := time.Now()
	if supported {
		ctx := c.s.ctx
		if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == -1 {
			acks = &ackWaits{}
			ctx = withAckWaits(ctx, acks)
		}
		if readsConn(h.key) {
			ctx = withConnState(ctx, &c.state)
		}
		if isGroupKey(h.key) {
			ctx = kapi.WithClient(ctx, deref(h.clientID), c.nc.RemoteAddr())
		}
		if fr, ok := req.(*kmsg.FetchRequest); ok && fr.Version >= 13 {
			// Fetch 13+ names topics by id: authorization needs the names.
			c.s.resolveFetchTopicIDs(ctx, fr)
		}
		if code := c.authorize(req); code != 0 {
			resp = api.Fail(req, code)
		} else {
			resp = api.Serve(c.s, ctx, req)
		}
		if pr, ok := req.(*kmsg.ProduceRequest); ok && acks != nil && pr.TimeoutMillis > 0 {
			// The appends are done (pipeline.go: the time rule).
			acks.deadline = waitsUntil(start, time.Now(), time.Duration(pr.TimeoutMillis)*time.Millisecond)
		}
		if mr, ok := req.(*kmsg.MetadataRequest); ok {
			if r, ok := resp.(*kmsg.MetadataResponse); ok {
				c.filterMetadata(mr, r)
			}
		}
		c.chargeQuota(h, len(frame), resp, time.Since(start))
		c.audit(h, req, resp)
	} else {
		resp = api.Fail(req, kerr.UnsupportedVersion.Code)
	}
	if c.s.log.Enabled(c.s.ctx, slog.LevelDebug) {
		c.s.log.Debug("kafka request", "api", kmsg.NameForKey(h.key), "version", h.version,
			"client_id", deref(h.clientID), "remote", c.nc.RemoteAddr(), "elapsed", time.Since(start))
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 && supported {
		return silentProduceOutcome(resp.(*kmsg.ProduceResponse))
	}
	// ApiVersions responses always use header v0 (KIP-511).
	if err := c.enqueue(writeJob{h: h, resp: resp, flexible: resp.IsFlexible() && h.key != apiVersionsKey, acks: acks}); err != nil {
		return err
	}
	if c.state.closeNow {
		// The response is written before the connection closes.
		return errReauthRefused
	}
	return nil
}

// write sends resp with a response header for h.
func (c *conn) write(h header, resp kmsg.Response, flexibleHeader bool) error {
	out := append(c.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(h.correlationID))
	if flexibleHeader {
		out = append(out, 0) // no tagged fields
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.IdleTimeout))
	if fr, ok := resp.(*fetchReply); ok {
		defer fr.close()
	}
	// The hand-written Fetch encoder covers the served versions; others
	// (errors for unsupported versions) go through kmsg.
	if fr, ok := resp.(*fetchReply); ok && fr.Version >= fetchMin && fr.Version <= fetchMax {
		var err error
		c.out, err = fr.writeTo(c.nc, out)
		return err
	}
	if mr, ok := resp.(*metadataReply); ok {
		var err error
		c.out, err = mr.writeTo(c.nc, out)
		return err
	}
	if pr, ok := resp.(*kmsg.ProduceResponse); ok {
		// Sized once, not grown by kmsg's appends; a buffer larger than
		// keepBuffer is dropped after the write (writeLoop).
		out = slices.Grow(out, produceResponseSize(pr))
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	c.out = out
	if _, err := c.nc.Write(out); err != nil {
		return fmt.Errorf("kafkaproto: writing response: %w", err)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// isGroupKey reports the API keys whose handlers read kapi.ClientOf.
func isGroupKey(key int16) bool {
	return key == int16(kmsg.JoinGroup) || key == int16(kmsg.DescribeGroups) || key == int16(kmsg.ListTransactions)
}

// readsConn reports the API keys whose handlers read the connection (its
// door, TLS, principal) from the request context; putting it there costs
// an allocation the other requests go without. ListTransactions checks the
// principal may describe each transaction it lists (kapi.Env.Authorized).
func readsConn(key int16) bool {
	switch key {
	case fetchKey, offsetForLeaderEpochKey, writeTxnMarkersKey, saslHandshakeKey, saslAuthenticateKey, int16(kmsg.ListTransactions):
		return true
	}
	return advertisesBrokers(key)
}
