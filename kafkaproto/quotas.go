package kafkaproto

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (Kafka's KIP-13/KIP-124/KIP-546): the admin APIs
// DescribeClientQuotas and AlterClientQuotas (kafkaproto/admin), and their
// enforcement, here. After a
// request is served the broker is told what it cost (QuotaEnforcer); a
// client over its quota gets the throttle in the response's
// throttle_time_ms and its connection is muted for that time: the next
// request is not read until the throttle ends (KIP-219), so a client that
// ignores throttle_time_ms is slowed all the same.

// chargeQuota runs after a client request is served: it charges the
// request, puts the throttle into the response and mutes the connection.
func (c *conn) chargeQuota(h header, frameLen int, resp kmsg.Response, elapsed time.Duration) {
	q, ok := c.s.broker.(QuotaEnforcer)
	if !ok || c.state.door == peerDoor {
		return
	}
	switch h.key {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return // a client must always be able to log in (Kafka exempts these too)
	}
	produced, fetched := 0, 0
	switch h.key {
	case produceKey:
		produced = frameLen
	case fetchKey:
		if fr, ok := resp.(*fetchReply); ok {
			fetched = fr.encodedSize()
		}
	}
	d := q.ChargeQuota(c.state.principal, deref(h.clientID), produced, fetched, elapsed)
	if d <= 0 {
		return
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		ms := d.Milliseconds() + 1
		if cur, _ := tr.Throttle(); int64(cur) < ms {
			if st, ok := resp.(interface{ SetThrottle(int32) }); ok {
				st.SetThrottle(int32(min(ms, 1<<31-1)))
			}
		}
	}
	if until := time.Now().Add(d); until.After(c.mutedUntil) {
		c.mutedUntil = until
	}
}

// waitMuted holds the reading of the next request until a throttle ends.
func (c *conn) waitMuted() {
	d := time.Until(c.mutedUntil)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.s.ctx.Done():
	}
}
