package kafkaproto

import (
	"context"
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

// ackWaits collects, while a produce request is handled, the replication
// waits its partitions still need.
type ackWaits struct {
	mu sync.Mutex
	// deadline is the end of the request's appends plus its timeout
	// (zero: none), as Kafka's delayed produce is created once the
	// request's local appends are done. The writer runs a connection's
	// waits one after another, so a timeout started there would start
	// only after the previous request's wait: pipelined requests to a
	// leader that cannot replicate would each add a whole timeout. Nor
	// does it start at the request's arrival: a new leader that took
	// most of the timeout to append to 48,000 partitions answered
	// REQUEST_TIMED_OUT for every one not replicated the moment its
	// appends ended, and the producer sent them all again (issue 19).
	deadline time.Time
	waits    []ackWait
}

type ackWait struct {
	p    *kmsg.ProduceResponseTopicPartition
	wait func(context.Context) error
}

type ackWaitsKey struct{}

func withAckWaits(ctx context.Context, w *ackWaits) context.Context {
	return context.WithValue(ctx, ackWaitsKey{}, w)
}

func ackWaitsFrom(ctx context.Context) *ackWaits {
	w, _ := ctx.Value(ackWaitsKey{}).(*ackWaits)
	return w
}

func (w *ackWaits) add(p *kmsg.ProduceResponseTopicPartition, wait func(context.Context) error) {
	w.mu.Lock()
	w.waits = append(w.waits, ackWait{p, wait})
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
		if err := aw.wait(ctx); err != nil {
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
