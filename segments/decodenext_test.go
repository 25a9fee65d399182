package segments

import (
	"reflect"
	"testing"
)

// DecodeNextBatch decodes what DecodeBatch decodes, for plain and
// compressed batches, and refuses bytes that are not the batch NextBatch
// described.
func TestDecodeNextBatch(t *testing.T) {
	plain := valueBatch(20, 100, 3)
	for _, b := range [][]byte{plain, withCodec(t, plain, codecZstd, false), withCodec(t, plain, codecLZ4, false)} {
		info, ok, err := NextBatch(b)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		want := decodeAll(t, func() (*Records, error) { return DecodeBatch(b, 1<<20) })
		got := decodeAll(t, func() (*Records, error) { return DecodeNextBatch(b[:info.Size], info, 1<<20) })
		if len(got) != 20 || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %d records %+v, want %+v", len(got), got, want)
		}
		if _, err := DecodeNextBatch(b[:info.Size-1], info, 1<<20); err == nil {
			t.Fatal("a short batch was decoded")
		}
		other := info
		other.BaseOffset++
		if _, err := DecodeNextBatch(b[:info.Size], other, 1<<20); err == nil {
			t.Fatal("a batch other than the one described was decoded")
		}
	}
}

func decodeAll(t *testing.T, open func() (*Records, error)) []Record {
	t.Helper()
	it, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []Record
	var r Record
	for it.Next(&r) {
		out = append(out, r)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}
