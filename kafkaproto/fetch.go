package kafkaproto

import (
	"context"
	"math"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch, key 1: versions 4-12 (flexible from 12). Sessionless: a client
// asking for a new session gets session id 0, which tells it to keep
// sending full requests. Long polling waits until MinBytes are available,
// MaxWaitMillis pass, a partition reports an error, or metadata changes.
// Response and partition byte limits follow KIP-74: the first partition
// with data returns at least one whole batch. Records are written straight
// from the broker's chunks (sendfile) by fetchwrite.go.
const (
	fetchKey = 1
	fetchMin = 4
	fetchMax = 12
)

func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) *fetchReply {
	fr := newFetchReply(req)
	if code := fetchSessionError(req); code != 0 {
		fr.ErrorCode = code
		return fr
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		_, metaChanged := s.broker.Cluster()
		waits := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(metaChanged)},
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if ch := s.broker.Notify(rt.Topic, rp.Partition); ch != nil {
					waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
				}
			}
		}
		size, failed := s.fetchOnce(ctx, req, fr)
		wait := time.Until(deadline)
		if failed || int64(size) >= int64(req.MinBytes) || wait <= 0 || ctx.Err() != nil {
			return fr
		}
		fr.reset()
		timer := time.NewTimer(wait)
		waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
		reflect.Select(waits)
		timer.Stop()
	}
}

// fetchSessionError checks the session fields of a sessionless server.
func fetchSessionError(req *kmsg.FetchRequest) int16 {
	switch {
	case req.Version < 7 || req.SessionEpoch == -1 || (req.SessionID == 0 && req.SessionEpoch == 0):
		return 0
	case req.SessionID != 0:
		return kerr.FetchSessionIDNotFound.Code
	default:
		return kerr.InvalidFetchSessionEpoch.Code
	}
}

// fetchOnce reads every requested partition into fr. It returns the bytes
// of records read and whether any partition failed.
func (s *Server) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, fr *fetchReply) (int, bool) {
	remaining := int64(math.MaxInt32)
	if req.MaxBytes > 0 {
		remaining = int64(req.MaxBytes)
	}
	total, failed := 0, false
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			p := &fr.Topics[i].Partitions[j]
			budget := max(min(int64(rp.PartitionMaxBytes), remaining), 1)
			res, err := s.broker.Fetch(ctx, FetchRequest{
				Topic:              rt.Topic,
				Partition:          rp.Partition,
				Offset:             rp.FetchOffset,
				MaxBytes:           int(budget),
				CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
				ReadCommitted:      req.IsolationLevel == 1,
			})
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			if err != nil {
				closeChunk(res.Records)
				p.ErrorCode = kafkaErr(err)
				if p.ErrorCode == kerr.UnknownServerError.Code {
					s.log.Warn("fetch failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
				failed = true
				continue
			}
			n := 0
			if res.Records != nil {
				n = res.Records.Len()
			}
			// KIP-74: only the first data may exceed the limits.
			if n == 0 || (total > 0 && int64(n) > budget) || remaining <= 0 {
				closeChunk(res.Records)
				continue
			}
			fr.chunks[i][j] = res.Records
			total += n
			remaining -= int64(n)
		}
	}
	return total, failed
}

func closeChunk(c Chunk) {
	if c != nil {
		c.Close()
	}
}

func newFetchReply(req *kmsg.FetchRequest) *fetchReply {
	fr := &fetchReply{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
	fr.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	fr.chunks = make([][]Chunk, len(req.Topics))
	for i, rt := range req.Topics {
		t := &fr.Topics[i]
		*t = kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		fr.chunks[i] = make([]Chunk, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
		}
	}
	return fr
}

func fetchError(req *kmsg.FetchRequest, code int16) *fetchReply {
	fr := newFetchReply(req)
	fr.ErrorCode = code
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			fr.Topics[i].Partitions[j].ErrorCode = code
		}
	}
	return fr
}
