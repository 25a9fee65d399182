package broker

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producers"
)

func testKey(key, body string) producers.Key {
	return producers.NewKey("", key, sha256.Sum256([]byte(body)))
}

// keyedBatch is the batch the HTTP door builds for records under key k.
func keyedBatch(k producers.Key, ts int64, values ...string) []byte {
	var recs []recordbatch.NewRecord
	for _, v := range values {
		recs = append(recs, recordbatch.NewRecord{Timestamp: ts, Value: []byte(v)})
	}
	b := recordbatch.Build(recs)
	StampKey(b, k)
	return b
}

// A retry under the same key and body is answered with the original
// offsets and writes nothing, also after the index is dropped (as on a
// restart, a truncation or a new leadership); another body is refused.
func TestIdempotencyKeyRetry(t *testing.T) {
	p := testPartition(t, nil)
	now := time.Now().UnixMilli()
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Timestamp: now, Value: []byte("before")}})); err != nil {
		t.Fatal(err)
	}
	k := testKey("k1", "body")
	first, err := p.appendKeyed(keyedBatch(k, now, "a", "b"), &k)
	if err != nil || first.Duplicate || first.BaseOffset != 1 || first.LastOffset != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	for _, drop := range []bool{false, true} {
		if drop {
			p.appendMu.Lock()
			p.keys.Reset() // rebuilt from the log
			p.appendMu.Unlock()
		}
		// A retry's records get a new timestamp: only the key and the
		// request digest decide.
		res, err := p.appendKeyed(keyedBatch(k, now+10, "a", "b"), &k)
		if err != nil || !res.Duplicate || res.BaseOffset != 1 || res.LastOffset != 2 {
			t.Fatalf("retry (index dropped %v): %+v %v", drop, res, err)
		}
		other := testKey("k1", "another body")
		if _, err := p.appendKeyed(keyedBatch(other, now, "c"), &other); !errors.Is(err, ErrIdempotencyKeyReused) {
			t.Fatalf("same key, other body (index dropped %v): %v, want reused", drop, err)
		}
	}
	k2 := testKey("k2", "body")
	if res, err := p.appendKeyed(keyedBatch(k2, now, "a", "b"), &k2); err != nil || res.Duplicate || res.BaseOffset != 3 {
		t.Fatalf("another key, same body: %+v %v", res, err)
	}
	if got := p.log().EndOffset(); got != 5 {
		t.Fatalf("log end %d, want 5: a retry wrote", got)
	}
}

// Keys derived producer ids never reach the Kafka producer table, and the
// Kafka door cannot write under them.
func TestIdempotencyKeyIDsApart(t *testing.T) {
	p := testPartition(t, &producers.Policy{Expiration: time.Hour, MaxIDs: 1,
		Allocated: func() (int64, <-chan struct{}) { return 10, make(chan struct{}) }})
	now := time.Now().UnixMilli()
	for i := range 5 {
		k := testKey(fmt.Sprint("key", i), "b")
		if _, err := p.appendKeyed(keyedBatch(k, now, "v"), &k); err != nil {
			t.Fatalf("keyed append with an unallocated id: %v", err)
		}
	}
	if _, err := p.append(idemBatch(t, 3, 0, 0, "kafka", now)); err != nil {
		t.Fatal(err)
	}
	p.appendMu.Lock()
	n := p.producers.Get().Len()
	p.appendMu.Unlock()
	if n != 1 {
		t.Fatalf("producer table holds %d ids, want the Kafka producer alone", n)
	}
	k := testKey("key0", "b")
	raw := keyedBatch(k, now, "forged")
	if _, err := p.append(raw); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("a Kafka batch under a key's id: %v, want unknown producer id", err)
	}
}

// A key expires after the window by its batch's time, also when the
// index is rebuilt from the log (the index's own bounds: package producers).
func TestIdempotencyKeyExpiresInRebuild(t *testing.T) {
	policy := &producers.KeyPolicy{Expiration: time.Hour, MaxKeys: 100}
	now := time.Now()
	p := testPartition(t, nil)
	p.keyPolicyCfg = policy
	old := now.Add(-2 * time.Hour).UnixMilli()
	k := testKey("old", "b")
	if _, err := p.appendKeyed(keyedBatch(k, old, "v"), &k); err != nil {
		t.Fatal(err)
	}
	p.appendMu.Lock()
	p.keys.Reset()
	p.appendMu.Unlock()
	res, err := p.appendKeyed(keyedBatch(k, now.UnixMilli(), "v"), &k)
	if err != nil || res.Duplicate {
		t.Fatalf("an expired key after the rebuild: %+v %v, want a new write", res, err)
	}
}

// The fields StampKey puts into a batch read back as the same key, and
// the batch is no Kafka idempotent batch.
func TestIdempotencyKeyStampRoundTrip(t *testing.T) {
	for i := range 1000 {
		k := testKey(fmt.Sprint("k", i), fmt.Sprint("body", i))
		var v batchView
		if err := splitBatches(keyedBatch(k, 1, "x", "y", "z"), func(b batchView) error { v = b; return nil }); err != nil {
			t.Fatal(err)
		}
		got, ok := producers.KeyOf(v.ProducerID, v.epoch, v.firstSeq, v.IsControl())
		if !ok || got != k || v.Idempotent() {
			t.Fatalf("key %+v read back as %+v %v (idempotent %v)", k, got, ok, v.Idempotent())
		}
	}
}

// Keyed and plain writes racing a rebuild of the index (which reads the
// log without appendMu) still store each key once.
func TestIdempotencyKeyRebuildRacesWrites(t *testing.T) {
	p := testPartition(t, nil)
	now := time.Now().UnixMilli()
	const keys, writers = 200, 8
	for i := range keys / 2 { // half the keys are in the log before the race
		k := testKey(fmt.Sprint(i), "b")
		if _, err := p.appendKeyed(keyedBatch(k, now, fmt.Sprint(i)), &k); err != nil {
			t.Fatal(err)
		}
	}
	p.appendMu.Lock()
	p.resetKeysLocked()
	p.appendMu.Unlock()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range keys {
				k := testKey(fmt.Sprint((i+w*25)%keys), "b")
				if _, err := p.appendKeyed(keyedBatch(k, now, fmt.Sprint((i+w*25)%keys)), &k); err != nil {
					errs <- err
					return
				}
				if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Timestamp: now, Value: []byte("plain")}})); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					p.appendMu.Lock()
					p.resetKeysLocked() // as a follower's append would
					p.appendMu.Unlock()
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := p.log().EndOffset(), int64(keys+writers*keys); got != want {
		t.Fatalf("log end %d, want %d: %d keyed writes repeated", got, want, got-want)
	}
}

// A storage recovery that cut the tail (an unacknowledged keyed batch)
// must not leave the key answering retries with offsets that hold nothing.
func TestIdempotencyKeyForgottenWhenRecoveryCuts(t *testing.T) {
	p := testPartition(t, nil)
	now := time.Now().UnixMilli()
	k := testKey("cut", "b")
	if _, err := p.appendKeyed(keyedBatch(k, now, "v"), &k); err != nil {
		t.Fatal(err)
	}
	if err := p.log().Truncate(0); err != nil { // what recovery of a torn tail does
		t.Fatal(err)
	}
	p.recovered()
	res, err := p.appendKeyed(keyedBatch(k, now, "v"), &k)
	if err != nil || res.Duplicate || p.log().EndOffset() != 1 {
		t.Fatalf("retry after the batch was cut: %+v %v (log end %d), want a new write", res, err, p.log().EndOffset())
	}
}
