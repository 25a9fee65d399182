package kafkaproto

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeFrame writes body with its size prefix.
func writeFrame(t testing.TB, c net.Conn, body []byte) {
	t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.Write(append(frame, body...)); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one size-prefixed response.
func readResponseFrame(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return body
}

var testFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("kafkaproto-test"))

// roundTrip sends req and decodes its response, checking the correlation
// id and the response header version.
func roundTrip(t testing.TB, c net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	const corr = 0x01020304
	if _, err := c.Write(testFormatter.AppendRequest(nil, req, corr)); err != nil {
		t.Fatal(err)
	}
	return decodeResponse(t, req, readResponseFrame(t, c), corr)
}

func decodeResponse(t testing.TB, req kmsg.Request, body []byte, corr int32) kmsg.Response {
	t.Helper()
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("flexible response header: want empty tags, got % x", body[:min(len(body), 4)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func apiVersionsRequest(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	return req
}
