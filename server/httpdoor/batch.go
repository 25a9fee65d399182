package httpdoor

import (
	"context"
	"fmt"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/producers"

	"github.com/runnel/runnel/recordbatch"
)

// The HTTP door's binary batch media type (api.BatchBackend): Kafka
// RecordBatch v2 bytes appended and read as they are, checked on the way in
// exactly as a Kafka produce is (partition.append: framing, CRC, records,
// max.message.bytes), never trusted.

var _ api.BatchBackend = (*Door)(nil)

// ProduceBatches implements api.BatchBackend. Batches go to the partition's
// leader: a follower answers ErrNotLeader (GET /v1/topics/{topic} names the
// leader), as batches are not re-encoded for the forwarder.
func (h *Door) ProduceBatches(ctx context.Context, topic string, partition int32, batches []byte, acks, maxRecords int) (int64, int, error) {
	p, err := h.batchPartition(ctx, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	records, err := checkHTTPBatches(batches, maxRecords)
	if err != nil {
		return 0, 0, toHTTPError(err)
	}
	if acks == api.AcksAll {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, acksAllTimeout)
			defer cancel()
		}
	}
	res, err := p.Produce(ctx, batches, acks)
	if err != nil {
		return 0, 0, toHTTPError(err)
	}
	h.cfg.Metrics.Produced(topic, int(res.LastOffset-res.BaseOffset+1), len(batches))
	if acks == api.AcksNone {
		return -1, records, nil
	}
	return res.BaseOffset, records, nil
}

// checkHTTPBatches checks the headers of a batch body before the append
// checks the rest: no producer id, no transaction, no control batch, at
// most maxRecords records. It returns the record count.
func checkHTTPBatches(batches []byte, maxRecords int) (int, error) {
	records := 0
	err := broker.WalkBatches(batches, func(raw []byte, b recordbatch.Info) error {
		// Ids of the idempotency key range are refused by the append
		// (only the HTTP door's keyed produce writes under them).
		idempotent := b.ProducerID >= 0 && !producers.IsKeyID(b.ProducerID)
		switch {
		case idempotent || b.Transactional:
			// HTTP has no producer ids: InitProducerId is Kafka's.
			return fmt.Errorf("%w: batch at byte %d has producer id %d or is transactional; HTTP batches carry producer id -1", api.ErrInvalidRequest, len(batches)-len(raw), b.ProducerID)
		case b.Control:
			return fmt.Errorf("%w: clients may not write control batches (transaction markers)", api.ErrInvalidRequest)
		}
		records += int(b.NumRecords)
		if records > maxRecords {
			return fmt.Errorf("%w: more than %d records; send at most %d per request", api.ErrTooManyRecords, maxRecords, maxRecords)
		}
		return nil
	})
	return records, err
}

// batchPartition is the local leader of topic-partition for a batch
// request.
func (h *Door) batchPartition(ctx context.Context, topic string, partition int32) (*broker.Partition, error) {
	if err := admin.RefuseInternal(topic, "produce to"); err != nil {
		return nil, toHTTPError(err)
	}
	img, t, err := h.topicPartition(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	p, addr, err := h.route(ctx, img, t, partition)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: %s-%d is led by the node at %s; send record batches there", api.ErrNotLeader, topic, partition, addr)
	}
	return p, nil
}

// ConsumeBatches implements api.BatchBackend: stored batches below the high
// watermark, each checked (recordbatch.Next: framing, CRC) before it is
// served, long-polling like Consume.
func (h *Door) ConsumeBatches(ctx context.Context, req api.ConsumeRequest) (api.BatchResult, error) {
	if _, _, err := h.topicPartition(ctx, req.Topic, req.Partition); err != nil {
		return api.BatchResult{}, err
	}
	p, err := h.cfg.Broker().Partition(req.Topic, req.Partition)
	if err != nil {
		return api.BatchResult{}, toHTTPError(err)
	}
	offset, err := p.ResolveOffset(req.Offset, req.Timestamp, !req.ReadUncommitted)
	if err != nil {
		return api.BatchResult{}, toHTTPError(err)
	}
	var timer <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		changed := p.Changed()
		res, err := p.ReadBatches(offset, req.MaxBytes, !req.ReadUncommitted)
		if err != nil || res.Records > 0 || timer == nil {
			if err == nil {
				h.cfg.Metrics.Consumed(req.Topic, res.Records, len(res.Batches))
			}
			return res, toHTTPError(err)
		}
		select {
		case <-changed:
		case <-timer:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}
