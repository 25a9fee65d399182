package kafkaconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is a minimal client connection speaking the Kafka protocol to
// another broker: followers use it to fetch from leaders, with kmsg's
// request and response types. One request at a time.
type Conn struct {
	conn   net.Conn
	r      *bufio.Reader
	format *kmsg.RequestFormatter
	corr   int32
	buf    []byte
}

// maxReplicaResponse bounds one response frame before it is allocated.
const maxReplicaResponse = 256 << 20

// New speaks Kafka over conn (a connection to a broker's inter-broker
// port), naming itself clientID.
func New(conn net.Conn, clientID string) *Conn {
	return &Conn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10),
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// Do sends req (with its version set) and decodes the answer into resp.
// It returns when ctx ends too (its error then wraps ctx.Err()): closing
// a broker must not wait out a slow leader's answer. After any error the
// connection's framing is lost: close it.
func (c *Conn) Do(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	} else {
		c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) }) // wakes the read below
	defer stop()
	err := c.do(req, resp)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), ctx.Err())
	}
	return err
}

func (c *Conn) do(req kmsg.Request, resp kmsg.Response) error {
	c.corr++
	c.buf = c.format.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.conn.Write(c.buf); err != nil {
		return fmt.Errorf("send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxReplicaResponse {
		return fmt.Errorf("read %s response: frame of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return fmt.Errorf("read %s response: correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, c.corr)
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		// The response header's tagged fields: none are defined, so skip them.
		tags, n := binary.Uvarint(body)
		if n <= 0 {
			return fmt.Errorf("read %s response: bad header tags", kmsg.NameForKey(req.Key()))
		}
		body = body[n:]
		for i := uint64(0); i < tags; i++ {
			_, n1 := binary.Uvarint(body)
			l, n2 := binary.Uvarint(body[max(n1, 0):])
			if n1 <= 0 || n2 <= 0 || uint64(len(body)) < uint64(n1+n2)+l {
				return fmt.Errorf("read %s response: bad header tag", kmsg.NameForKey(req.Key()))
			}
			body = body[uint64(n1+n2)+l:]
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

func (c *Conn) Close() error { return c.conn.Close() }
