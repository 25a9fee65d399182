package api_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
)

func TestSeriesRing(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := api.NewSeriesRing(10*time.Second, 6, clock)
	var _ api.SeriesBackend = r

	r.AddProduced("a", 3, 30)
	r.AddProduced("a", 1, 10)
	r.SetLag("g", 7)
	advance(20 * time.Second)
	r.AddConsumed("a", 2, 20)
	r.SetLag("g", 5)
	r.SetLag("g", 4)

	s, _ := r.Series(context.Background())
	if s.IntervalMS != 10_000 || len(s.Topics) != 1 || len(s.Groups) != 1 {
		t.Fatalf("series %+v", s)
	}
	ts := s.Topics[0]
	want := []int64{0, 0, 0, 4, 0, 0}
	for i := range want {
		if ts.ProducedRecords[i] != want[i] {
			t.Fatalf("produced %v, want %v", ts.ProducedRecords, want)
		}
	}
	if ts.ConsumedRecords[5] != 2 || ts.ConsumedBytes[5] != 20 || ts.ProducedBytes[3] != 40 {
		t.Fatalf("topic series %+v", ts)
	}
	if lag := s.Groups[0].Lag; lag[3] != 7 || lag[4] != -1 || lag[5] != 4 {
		t.Fatalf("lag %v", lag)
	}
	if end := s.StartMS + 5*s.IntervalMS; end > clock().UnixMilli() || end+s.IntervalMS <= clock().UnixMilli() {
		t.Fatalf("last bucket [%d, +10s) does not hold now %d", end, clock().UnixMilli())
	}

	// A slot reused after a full window must not show the old value.
	advance(40 * time.Second)
	r.AddProduced("b", 1, 1)
	s, _ = r.Series(context.Background())
	for _, x := range s.Topics {
		if x.Topic == "a" {
			for _, v := range x.ProducedRecords {
				if v == 4 {
					t.Fatalf("stale bucket resurfaced: %v", x.ProducedRecords)
				}
			}
		}
	}
	// After a whole idle window, a and g are forgotten.
	advance(60 * time.Second)
	r.AddProduced("b", 1, 1)
	s, _ = r.Series(context.Background())
	if len(s.Topics) != 1 || s.Topics[0].Topic != "b" || len(s.Groups) != 0 {
		t.Fatalf("idle series kept: %+v", s)
	}
}

func TestSeriesRingConcurrent(t *testing.T) {
	r := api.NewSeriesRing(0, 0, nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.AddProduced("t", 1, 2)
				r.SetLag("g", int64(i))
			}
		}()
	}
	wg.Wait()
	s, _ := r.Series(context.Background())
	var total int64
	for _, v := range s.Topics[0].ProducedRecords {
		total += v
	}
	if total != 4000 || len(s.Topics[0].ProducedRecords) != api.DefaultSeriesBuckets {
		t.Fatalf("total %d over %d buckets", total, len(s.Topics[0].ProducedRecords))
	}
}
