package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/broker/replfetch"
)

// A follower checks each partition it starts following (a new leader or
// leader epoch) against the leader's epochs before fetching it (KIP-279):
// OffsetForLeaderEpoch says where the follower's last epoch ends in the
// leader's log, and the follower cuts its own log there.
//
// Up to one request's worth of partitions are asked on the fetch
// connection, in the round. More are asked in the background, on a
// connection of their own, while the rounds go on fetching the partitions
// already checked (issue 19: after a kill -9 at 300,000 partitions a
// survivor asked the other about 100,000 moved partitions, 13 requests
// taking 6.5 s in all, and fetched nothing from it meanwhile: the
// partitions that leader had led all along, written by acks=all producers
// waiting on this follower, timed out at 10 s instead of being answered
// in a second, and each producer's next request waited for that answer).
// The background's answers come back to the run goroutine, which owns the
// partitions' followState (takeEpochAnswers); the logs are cut where they
// are asked about, each under the epoch it was asked at
// (truncateAsFollower), so a leadership that moved meanwhile cuts nothing.
// At most one background ask runs per leader; the partitions it holds are
// neither asked again nor fetched until it answered them.

// truncate asks the leader where each new follower's log diverged and cuts
// the local log there: one OffsetForLeaderEpoch request for all of them
// (up to maxEpochAsks each), as Kafka's fetcher batches them. One
// request per partition, each a round trip during which nothing was
// fetched from this leader, kept thousands of partitions out of the ISR
// after a leader moved many at once (issue 19). More than one request's
// worth are asked in the background (above).
func (f *leaderFetcher) truncate(conn *kafkaconn.Conn) error {
	f.takeEpochAnswers()
	var asks []epochAsk
	for p, st := range f.work {
		if st == nil || p.applying.Load() || st.truncated || st.asking {
			continue // busy: checked once its apply, open or ask is done
		}
		// A log never written has nothing to cut, and stays unopened
		// until the leader sends it records (applyFetched). Following any
		// other opens its log (lazylog.go), on the fetch pool
		// (fetchapply.go): the partition is checked in a round after
		// that; one that fails to open is not fetched and is tried again.
		// Whether an unopened log holds records is a listing of its
		// directory, made on the pool too (openOff), not in this loop: a
		// follower back from a restart listed the directories of the
		// 66,000 partitions it followed from one leader one after the
		// other here, fetching nothing from it meanwhile (issue 19).
		if p.log() == nil {
			if lp := p.lazy.peeked.Load(); lp != nil && lp.empty() {
				st.truncated = true
			} else {
				f.openOff(p)
			}
			continue
		}
		lastEpoch := p.log().LeaderEpoch()
		if lastEpoch < 0 || p.log().EndOffset() == 0 {
			st.truncated = true
			continue
		}
		asks = append(asks, epochAsk{p: p, st: st, askEpoch: p.leaderEpoch.Load(), lastEpoch: lastEpoch})
	}
	switch {
	case len(asks) == 0:
		return nil
	case len(asks) > f.asksPerRequest:
		if f.epochs == nil { // else asked once the one running is done
			f.askInBackground(asks)
		}
		return nil
	}
	err := f.askEpochs(conn, asks)
	settleAsks(asks)
	return err
}

// epochBatch is asks the background answered (or did not: err).
type epochBatch struct {
	asks []epochAsk
	err  error
}

// askInBackground asks the leader about asks on a connection of its own,
// f.asksPerRequest at a time, and hands each request's asks back on
// f.epochs, closed when done. Called by the run goroutine, with no
// background ask running; the goroutine is the manager's (m.wg) and ends
// with its context.
func (f *leaderFetcher) askInBackground(asks []epochAsk) {
	for i := range asks {
		asks[i].st.asking = true
	}
	per := f.asksPerRequest
	ch := make(chan epochBatch, (len(asks)+per-1)/per+1) // never blocks: a batch a request, and the rest after an error
	f.epochs = ch
	f.m.wg.Go(func() {
		defer f.wake() // the next round takes the answers
		defer close(ch)
		conn, err := f.connect()
		if err != nil {
			ch <- epochBatch{asks: asks, err: fmt.Errorf("dial leader %d: %w", f.leader, err)}
			return
		}
		defer conn.Close()
		for len(asks) > 0 {
			k := min(len(asks), per)
			err := f.askEpochs(conn, asks[:k])
			ch <- epochBatch{asks: asks[:k], err: err}
			f.wake()
			if err != nil {
				ch <- epochBatch{asks: asks[k:]} // not asked: a later round asks again
				return
			}
			asks = asks[k:]
		}
	})
}

// takeEpochAnswers settles what the background ask answered so far.
func (f *leaderFetcher) takeEpochAnswers() {
	for f.epochs != nil {
		select {
		case b, ok := <-f.epochs:
			if !ok {
				f.epochs = nil
				return
			}
			settleAsks(b.asks)
			if b.err != nil && f.m.ctx.Err() == nil {
				f.m.logger.Debug("replica epochs", "leader", f.leader, "err", b.err)
			}
		default:
			return
		}
	}
}

// settleAsks records what each ask's answer decided; one not answered
// (the leader's error, or no answer) is asked again.
func settleAsks(asks []epochAsk) {
	for _, a := range asks {
		a.st.asking = false
		if a.answered {
			a.st.truncated = a.done
		}
	}
}

// epochAsk is one partition's question to the leader: where does my last
// epoch end in your log, asked at leader epoch askEpoch.
type epochAsk struct {
	p                   *Partition
	st                  *followState // the run goroutine's: settleAsks sets it
	askEpoch, lastEpoch int32

	answered, done bool // set by askEpochs; done: its log matches the leader's now
}

// askEpochs sends one OffsetForLeaderEpoch for asks and cuts each log
// where it diverged. It sets each ask's answered and done, not its
// followState (settleAsks does): it may run in the background.
func (f *leaderFetcher) askEpochs(conn *kafkaconn.Conn, asks []epochAsk) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(4)
	req.ReplicaID = f.m.self
	byTopic := map[string]int{}
	byKey := make(map[replfetch.TopicPartition]*epochAsk, len(asks))
	for i := range asks {
		a := &asks[i]
		ti, ok := byTopic[a.p.topic]
		if !ok {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = a.p.topic
			req.Topics = append(req.Topics, rt)
			ti = len(req.Topics) - 1
			byTopic[a.p.topic] = ti
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = a.p.index, a.askEpoch, a.lastEpoch
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
		byKey[replfetch.TopicPartition{Topic: a.p.topic, Partition: a.p.index}] = a
	}
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	ctx, cancel := context.WithTimeout(f.m.ctx, 10*time.Second)
	err := conn.Do(ctx, req, resp)
	cancel()
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, r := range rt.Partitions {
			key := replfetch.TopicPartition{Topic: rt.Topic, Partition: r.Partition}
			a := byKey[key]
			if a == nil {
				return fmt.Errorf("offset for leader epoch: answer for %s-%d, not asked", rt.Topic, r.Partition)
			}
			delete(byKey, key) // answered once
			if r.ErrorCode != 0 {
				continue // the leader is not ready for us yet; try again next round
			}
			p := a.p
			end, done, err := divergence(p, r.LeaderEpoch, r.EndOffset)
			if err != nil {
				return err
			}
			f.m.logger.Debug("follower truncation", "topic", p.topic, "partition", p.index, "leader", f.leader,
				"leader_epoch", a.askEpoch, "last_epoch", a.lastEpoch, "log_end", p.log().EndOffset(),
				"answer_epoch", r.LeaderEpoch, "answer_end", r.EndOffset, "cut_to", end, "done", done)
			if err := p.truncateAsFollower(end, a.askEpoch); err != nil {
				return err
			}
			a.answered, a.done = true, done
		}
	}
	return nil
}

// divergence is where a follower's log stops matching the leader's, from
// the leader's answer to OffsetForLeaderEpoch (the largest epoch it has at
// or below the follower's last, and where that epoch ends in its log), as
// Kafka's follower decides it (KIP-279). When the leader's epoch is one
// this log does not have, the log is cut where its own largest epoch below
// that ends, and done is false: the next round asks again with the epoch
// the log then ends with. end -1 cuts nothing (the leader knows no epoch
// at or below ours).
func divergence(p *Partition, leaderEpoch int32, leaderEnd int64) (end int64, done bool, err error) {
	if leaderEnd < 0 || leaderEpoch < 0 {
		return -1, true, nil
	}
	epoch, mine, err := p.log().EndOffsetForEpoch(leaderEpoch)
	if err != nil {
		return 0, false, err
	}
	if epoch < 0 {
		// Nothing here at or below the leader's epoch: all of it is
		// above the leader's history.
		return min(leaderEnd, p.log().EndOffset()), true, nil
	}
	return min(leaderEnd, mine), epoch == leaderEpoch, nil
}
