package kafkaproto

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelined acks=all produce. A connection's requests are read, handled and
// answered in order, as in Kafka; but an acks=all produce whose batches are
// already appended need not hold up the reading of the next request while
// it waits for the in-sync replicas. With a ReplicatedProducer broker the
// produce handler appends, and the replication waits move to the
// connection's writer, which answers every request in order. A producer's
// pipelined requests then share one replication round trip instead of
// queueing for one each.

// maxPipelined bounds the responses a connection holds while earlier ones
// wait for replication.
const maxPipelined = 16

// The time rule of a produce request with a timeout T (acks 1 and all;
// TimeoutMillis 0: none). Clients give up on a request at T after sending
// it (Java's request.timeout.ms, which it also sends as the timeout) or a
// little later (franz-go: T + 10 s). So the answer is due about T after
// the request arrived, however many partitions it holds:
//   - appends begin until T - G after the arrival, G being the grace
//     min(T/2, maxAckGrace); a partition whose turn comes later is not
//     appended and is answered REQUEST_TIMED_OUT (the producer sends it
//     again, in a smaller request). A new leader given one request for
//     100,000 partitions after a kill -9 took longer than franz-go's 20 s
//     to append them all: the client closed the connection and sent them
//     all again, twice, with none answered (issue 19).
//   - the acks=all waits end at the later of arrival + T and the end of
//     the appends + G: never before T, as in Kafka, and never less than
//     G after the partition's own append. Counted from the arrival alone,
//     a new leader that took most of the timeout to append to 48,000
//     partitions answered REQUEST_TIMED_OUT for every one not replicated
//     the moment its appends ended, and the producer sent them all again
//     (issue 19, f798c31); counted from the end of the appends plus T, a
//     long request was answered after the client gave up.
//
// Nor do the waits count from when the connection's writer reaches them:
// it runs a connection's waits one after another, so pipelined requests
// to a leader that cannot replicate would each add a whole timeout.
const maxAckGrace = 5 * time.Second

// ackGrace is G: the least time an acks=all wait gets after the request's
// appends, for a request timeout of timeout.
func ackGrace(timeout time.Duration) time.Duration { return min(timeout/2, maxAckGrace) }

// appendsUntil is when a request that arrived at arrival with timeout
// stops beginning appends.
func appendsUntil(arrival time.Time, timeout time.Duration) time.Time {
	return arrival.Add(timeout - ackGrace(timeout))
}

// waitsUntil is when the acks=all waits of a request that arrived at
// arrival with timeout, its appends done at appended, end.
func waitsUntil(arrival, appended time.Time, timeout time.Duration) time.Time {
	return later(arrival.Add(timeout), appended.Add(ackGrace(timeout)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ackWaits collects, while a produce request is handled, the replication
// waits its partitions still need.
type ackWaits struct {
	mu sync.Mutex
	// deadline ends the waits (waitsUntil; zero: none).
	deadline time.Time
	waits    []ackWait
}

type ackWait struct {
	p    *kmsg.ProduceResponseTopicPartition
	wait AckWait
}

type ackWaitsKey struct{}

func withAckWaits(ctx context.Context, w *ackWaits) context.Context {
	return context.WithValue(ctx, ackWaitsKey{}, w)
}

func ackWaitsFrom(ctx context.Context) *ackWaits {
	w, _ := ctx.Value(ackWaitsKey{}).(*ackWaits)
	return w
}

func (w *ackWaits) add(p *kmsg.ProduceResponseTopicPartition, wait AckWait) {
	w.mu.Lock()
	w.waits = append(w.waits, ackWait{p, wait})
	w.mu.Unlock()
}

// reserve makes room for n more waits.
func (w *ackWaits) reserve(n int) {
	w.mu.Lock()
	w.waits = slices.Grow(w.waits, n)
	w.mu.Unlock()
}

// finish runs the waits, recording failures in their partitions.
func (w *ackWaits) finish(ctx context.Context) {
	if len(w.waits) == 0 {
		return
	}
	if !w.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, w.deadline)
		defer cancel()
	}
	for _, aw := range w.waits {
		if err := aw.wait.Wait(ctx); err != nil {
			setProduceError(aw.p, err)
		}
	}
}

// writeJob is one response to write, after its replication waits if any.
type writeJob struct {
	h        header
	resp     kmsg.Response
	flexible bool
	acks     *ackWaits
}

// writeLoop writes the connection's responses in order. A write error closes
// the connection, which ends the reading side too.
func (c *conn) writeLoop(ctx context.Context, jobs <-chan writeJob, done chan<- struct{}) {
	defer close(done)
	failed := false
	for job := range jobs {
		if job.acks != nil {
			job.acks.finish(ctx)
		}
		if failed {
			if fr, ok := job.resp.(*fetchReply); ok {
				fr.close()
			}
			continue
		}
		if err := c.write(job.h, job.resp, job.flexible); err != nil {
			failed = true
			c.s.log.Info("closing kafka connection", "remote", c.nc.RemoteAddr().String(), "err", err)
			c.nc.Close()
		}
		if cap(c.out) > keepBuffer {
			c.out = nil
		}
	}
}
