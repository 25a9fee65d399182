package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// captureConn is a net.Conn that records what is written to it. Only the
// methods the request path uses are implemented.
type captureConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
func (c *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// FuzzRequestFrame feeds arbitrary request frames (header and body, without
// the size prefix) of every API key and version through the request path.
// It must not panic or block, and whatever it answers must decode as the
// response of the request's key and version.
func FuzzRequestFrame(f *testing.F) {
	for _, key := range sweepOrder {
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			req := sweepRequest(key, v)
			req.SetVersion(v)
			frame := testFormatter.AppendRequest(nil, req, 42)
			f.Add(frame[4:])
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > smallRequestMax {
			return
		}
		// A fresh broker each time keeps iterations independent and cheap.
		b := newMemBroker()
		mustCreate(t, b, "sweep", 3)
		mustCreate(t, b, "grow", 1)
		s := NewServer(b, Options{Logger: logger})
		s.cancel() // no long polls: every wait ends at once
		defer s.Close()
		nc := &captureConn{}
		c := &conn{s: s, nc: nc}
		if err := c.handle(frame); err != nil || nc.out.Len() == 0 {
			return
		}
		checkFuzzResponse(t, frame, nc.out.Bytes())
	})
}

func checkFuzzResponse(t *testing.T, frame, out []byte) {
	h, _, err := parseHeader(frame)
	if err != nil {
		t.Fatalf("answered a frame with a bad header: %v", err)
	}
	if size := int(binary.BigEndian.Uint32(out)); size != len(out)-4 {
		t.Fatalf("size prefix %d, response %d bytes", size, len(out)-4)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	api := handlerTable()[h.key]
	if h.key == apiVersionsKey && (h.version < api.Min || h.version > api.Max) {
		req.SetVersion(0)
	}
	decodeResponse(t, req, out[4:], h.correlationID)
}
