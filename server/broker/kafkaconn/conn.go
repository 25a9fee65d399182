package kafkaconn

import (
	"bufio"
	"context"
	"fmt"
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

	watched context.Context // Watch's: its end fails every Fetch
	unwatch func() bool
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
	resp.SetVersion(req.GetVersion())
	body, err := c.roundTrip(req, resp.IsFlexible(), func(n int) []byte { return make([]byte, n) })
	if err != nil {
		return err
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

func (c *Conn) Close() error {
	if c.unwatch != nil {
		c.unwatch()
	}
	return c.conn.Close()
}
