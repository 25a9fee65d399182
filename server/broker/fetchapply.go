package broker

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/broker/replfetch"
)

// A follower applies what it fetched, and opens the logs it must check
// against the leader, off its fetch loop and several at once (issue 19).
// The first records of a partition create its log (and the first batch of
// a leader epoch wrote the log's epoch checkpoint, two fsyncs, until the
// epochs moved into the log's state file): done one after the other in the
// loop, the first record written to each of 30,000 partitions took 58 s, nothing was fetched from that leader meanwhile,
// and its followers fell out of every ISR it led. So each partition of an
// answer is applied on the fetch manager's pool (workpool: at most
// replicaApplyWorkers goroutines for all leaders), and the loop waits for
// its round's applies for at most fetchManager.applyWait. A partition
// whose apply or open is still under way then is busy (Partition.applying):
// it is not fetched (a session forgets it, fetchsession.go) nor checked
// against the leader until it is done, and the other partitions of that
// leader are fetched on meanwhile.
//
// The logs a follower opens to check them against their leader (openOff:
// after a restart, every log with records; the listing that tells is on
// the apply pool) are opened on a pool of their own (fetchManager.opens,
// replicaOpenWorkers goroutines), not the one that applies answers: queued
// ahead of every apply there, the opens of 100,000 logs held back the
// applies of those already open and checked, so after a restart hardly a
// partition was back in sync until the last log was open (issue 19: 5,000
// in the first 27 s, 95,000 in the 14 s after).
//
// Nothing of the epoch and truncation rules moves: a partition is applied
// by one task at a time, with the leader epoch its fetch was sent at, and
// applyFetched, appendAsFollower and truncateAsFollower drop what a newer
// leader made stale when they run, as they did in the loop.
const (
	// replicaApplyWorkers bounds the goroutines applying answers (and
	// listing unopened logs' directories) for all the leaders a broker
	// follows: creating a log
	// and its first append wait mostly on the disk, which takes
	// concurrent fsyncs in one journal commit.
	replicaApplyWorkers = 16
	// replicaOpenWorkers bounds the goroutines opening (and recovering)
	// the logs the fetchers check against their leaders: a listing and a
	// few small reads each, waiting on the filesystem more than the CPU.
	replicaOpenWorkers = 16
	// replicaApplyWait bounds how long a fetch round waits for its
	// applies before it sends the next request.
	replicaApplyWait = 100 * time.Millisecond
)

// fetchAnswer is one round's answer and what applies it: the frame read
// and decoded (kafkaconn.FetchAnswer: its record batches are slices of
// the frame), the apply tasks queued on the pool, pointing into it, and
// the channel their results come back on. A round reuses the one before
// once every task of it reported its result: nothing reads it then
// (applyOne returns before its result is sent, and an apply keeps none
// of the bytes it appends: the log writes them, the tail cache and the
// producer table copy what they keep). A round whose applies were not
// all done within applyWait leaves its answer to them and makes a new
// one (nextAnswer). Each round made all of it anew (issue 19: the
// answer's decoding, its frame and the apply's tasks and channel were
// 223 MB of a survivor's 2.26 GB in the 40 s after a kill -9 at 300,000
// partitions). The run goroutine's own; a task reads its own element.
type fetchAnswer struct {
	kafkaconn.FetchAnswer
	tasks   []applyTask
	done    chan error // buffered for every task: a late apply's result is left here
	pending int        // tasks whose result was not received yet
	small   int        // answers in a row that used under a quarter of the frame
}

// bigAnswerRounds is how many answers in a row using under a quarter of
// a large frame a fetcher keeps its memory through before it lets it go
// (a burst's answer of 100,000 partitions is ~10 MB and their decoded
// partitions as much again: kept for the next burst, not for ever).
const (
	bigAnswerRounds = 64
	bigAnswerBytes  = 1 << 20
)

// maxRetiredAnswers bounds the answers a fetcher keeps for their late
// applies to finish (older ones are left to the collector).
const maxRetiredAnswers = 4

// nextAnswer is the answer this round reads into: the last round's if all
// its applies are done, else one of the answers retired with applies
// still running (f.retired) whose every apply has reported back since,
// else a new one. In a burst nearly every round leaves its answer to its
// applies (applying 100,000 partitions takes seconds, a round waits
// applyWait): without the retired ones, each round decoded into new
// arrays (issue 19: 331-382 MB of a survivor's ~1 GB allocated in the
// 40 s after a kill -9 at 300,000 partitions were the decoded
// partitions).
func (f *leaderFetcher) nextAnswer() *fetchAnswer {
	a := f.answer
	if a != nil && a.pending == 0 {
		return a
	}
	if a != nil {
		if len(f.retired) == maxRetiredAnswers {
			f.retired[0] = nil
			f.retired = f.retired[1:]
		}
		f.retired = append(f.retired, a)
	}
	a = nil
	for i, r := range f.retired {
		if len(r.done) < r.pending {
			continue
		}
		// Every late apply sent its result after it was done with the
		// answer (applyTask.Run): nothing reads it any more.
		for ; r.pending > 0; r.pending-- {
			<-r.done
		}
		a = r
		f.retired = slices.Delete(f.retired, i, i+1)
		break
	}
	if a == nil {
		a = &fetchAnswer{}
	}
	f.answer = a
	return a
}

// applyAnswer applies each partition of a fetch answer on the pool, and
// reports whether one failed (the loop then backs off) among those done
// within the manager's applyWait. Each goes back into the round's work: the
// next request forgets it while it is busy (fetchRequest).
func (f *leaderFetcher) applyAnswer(a *fetchAnswer) (backoff bool) {
	resp := &a.Resp
	n := 0
	for _, t := range resp.Topics {
		n += len(t.Partitions)
	}
	if cap(a.done) < n {
		a.done = make(chan error, n) // a late apply's result is left here unread
	}
	clear(a.tasks)
	tasks := slices.Grow(a.tasks[:0], n) // never grown below: the pool holds pointers into it
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			p, sent, st, ok := f.session.Lookup(t.Topic, rp.Partition)
			if !ok || st == nil || !p.applying.CompareAndSwap(false, true) {
				continue
			}
			f.work[p] = st
			tasks = append(tasks, applyTask{f: f, p: p, st: st, rp: rp, sent: sent, done: a.done})
			f.m.pool.DoTask(&tasks[len(tasks)-1])
		}
	}
	a.tasks, a.pending = tasks, len(tasks)
	f.m.stats.answered.Add(int64(n))
	failed := f.await(a)
	a.keepOrDrop()
	return failed
}

// keepOrDrop lets a large answer's memory go after bigAnswerRounds
// answers in a row that needed under a quarter of it.
func (a *fetchAnswer) keepOrDrop() {
	if used, kept := a.Size(); a.pending > 0 || kept < bigAnswerBytes || used*4 > kept {
		a.small = 0
		return
	}
	if a.small++; a.small >= bigAnswerRounds {
		*a = fetchAnswer{}
	}
}

// applyTask is one partition's apply of an answer, queued on the pool:
// one slice of them an answer, not a closure each (workpool.Task).
type applyTask struct {
	f    *leaderFetcher
	p    *Partition
	st   *followState
	rp   *kmsg.FetchResponseTopicPartition
	sent replfetch.Pos
	done chan<- error
}

func (t *applyTask) Run() { t.done <- t.f.applyOne(t.p, t.st, t.rp, t.sent) }

// applyOne is one partition's apply, on the pool. Its failure is its own:
// the others in the answer are applied (one stuck partition used to stop
// every partition fetched from its leader, out of the ISR with it), and
// it checks its divergence from the leader again before fetching on.
func (f *leaderFetcher) applyOne(p *Partition, st *followState, rp *kmsg.FetchResponseTopicPartition, sent replfetch.Pos) error {
	err := f.applyFetched(p, st, rp, sent)
	if err == nil && len(rp.RecordBatches) > 0 {
		f.m.rebuilds.after(p)
	}
	if err != nil && !errors.Is(err, errRetryLater) {
		f.m.logger.Debug("replica fetch", "leader", f.leader, "topic", p.topic, "partition", p.index, "err", err)
		st.truncated = false
	}
	p.applying.Store(false) // after st: the loop reads st once it sees this
	f.touch(p)
	return err
}

// openOff lists p's unopened log's directory on the apply pool and, if
// the log holds records, opens it on the open pool, for the divergence
// check that needs it (after a restart: opening recovers it). An empty one
// stays unopened: the round after this sees it listed empty. The listing
// is one small read, and on the apply pool it tells a log never written
// from the others without waiting for the opens queued ahead (a follower
// back from a restart fetches those logs at once).
func (f *leaderFetcher) openOff(p *Partition) {
	if !p.applying.CompareAndSwap(false, true) {
		return
	}
	settle := func() {
		p.applying.Store(false)
		f.touch(p)
	}
	f.m.pool.Do(func() {
		if _, empty := unopenedEmpty(p); empty {
			settle()
			return
		}
		f.m.opens.Do(func() {
			_ = p.ensureOpen() // a failure is logged there; the next round tries again
			settle()
		})
	})
}

// await waits for a's pending results, at most the manager's
// applyWait, and reports whether one was an error.
func (f *leaderFetcher) await(a *fetchAnswer) (failed bool) {
	if a.pending == 0 {
		return false
	}
	timer := time.NewTimer(f.m.applyWait)
	defer timer.Stop()
	for ; a.pending > 0; a.pending-- {
		select {
		case err := <-a.done:
			failed = failed || err != nil
		case <-timer.C:
			return failed
		case <-f.m.ctx.Done():
			return false
		}
	}
	return failed
}
