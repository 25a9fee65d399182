package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// TestReadDecodedEachMatchesCollect holds the streaming read (records
// handed to a callback straight from the decoded batch, as the HTTP JSON
// consume uses) to the collecting one: same records, keys, values,
// headers, transactional flags, markers (read_uncommitted with markers)
// and next offsets, at both isolation levels and under record and byte
// limits.
func TestReadDecodedEachMatchesCollect(t *testing.T) {
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	defer p.close()
	p.repl.isr = []int32{0}
	setLeader(p, 0, 1)
	seq := map[int]uint32{} // per producer id
	for txn := range 30 {
		recs := make([]recordbatch.NewRecord, 5)
		for i := range recs {
			recs[i] = recordbatch.NewRecord{Key: []byte(fmt.Sprintf("k%d-%d", txn, i)), Value: bytes.Repeat([]byte{byte(i)}, 50+i),
				Headers: []kmsg.Header{{Key: "h", Value: []byte{byte(txn)}}, {Key: "n"}}, Timestamp: time.Now().UnixMilli()}
		}
		raw := recordbatch.Build(recs)
		if txn%3 != 0 { // every third batch is plain, the others transactional
			raw[recordbatch.AttrAt+1] |= recordbatch.AttrTransactional
			binary.BigEndian.PutUint64(raw[43:], uint64(txn%5))
			binary.BigEndian.PutUint16(raw[51:], 0)
			binary.BigEndian.PutUint32(raw[53:], seq[txn%5])
			seq[txn%5] += 5
			recordbatch.SetCRC(raw)
		}
		if _, err := p.append(raw); err != nil {
			t.Fatal(err)
		}
		if txn%3 == 0 {
			continue
		}
		typ := recordbatch.ControlCommit
		if txn%4 == 1 {
			typ = recordbatch.ControlAbort
		}
		_, wait, err := p.appendMarker(recordbatch.Marker{ProducerID: int64(txn % 5), Type: typ})
		if err == nil {
			err = wait(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	type got struct {
		off, ts       int64
		key, val, hdr string
		txn           bool
		marker        string
	}
	markerString := func(m *recordbatch.Marker) string {
		if m == nil {
			return ""
		}
		return fmt.Sprintf("%d/%d", m.Type, m.ProducerID)
	}
	for _, mode := range []struct{ committed, markers bool }{{false, false}, {true, false}, {false, true}} {
		committed, markers := mode.committed, mode.markers
		nMarkers := 0
		for _, lim := range []struct{ recs, bytes int }{{1000, 1 << 20}, {7, 1 << 20}, {1000, 500}, {3, 1}} {
			var collected, streamed []got
			var nextC, nextS []int64
			for off := int64(0); off < p.hwm.Load(); {
				res, err := p.readDecodedEach(off, lim.recs, lim.bytes, committed, markers, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Records) > lim.recs {
					t.Fatalf("%d records, limit %d", len(res.Records), lim.recs)
				}
				for _, r := range res.Records {
					collected = append(collected, got{r.Offset, r.Timestamp, string(r.Key), string(r.Value), fmt.Sprint(r.Headers), r.Transactional, markerString(r.Control)})
					if r.Control != nil {
						nMarkers++
					}
				}
				nextC = append(nextC, res.Next)
				off = res.Next
			}
			for off := int64(0); off < p.hwm.Load(); {
				res, err := p.readDecodedEach(off, lim.recs, lim.bytes, committed, markers, func(r *recordbatch.Record, txn bool, m *recordbatch.Marker) error {
					var hs []kmsg.Header
					for _, h := range r.Headers {
						hs = append(hs, kmsg.Header{Key: h.Key, Value: h.Value})
					}
					streamed = append(streamed, got{r.Offset, r.Timestamp, string(r.Key), string(r.Value), fmt.Sprint(hs), txn, markerString(m)})
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				nextS = append(nextS, res.Next)
				off = res.Next
			}
			if fmt.Sprint(collected) != fmt.Sprint(streamed) || fmt.Sprint(nextC) != fmt.Sprint(nextS) {
				t.Fatalf("%+v limits=%v: streamed read differs\ncollected %v %v\nstreamed  %v %v", mode, lim, len(collected), nextC, len(streamed), nextS)
			}
			if len(collected) == 0 {
				t.Fatalf("%+v limits=%v: nothing read", mode, lim)
			}
			// 20 transactions, one marker each; without markers, none.
			if want := map[bool]int{false: 0, true: 20}[markers]; nMarkers != want {
				t.Fatalf("%+v limits=%v: %d markers, want %d", mode, lim, nMarkers, want)
			}
			nMarkers = 0
		}
	}
}
