package recordbatch

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A control batch built here is what Kafka's clients decode as a marker
// (kmsg's ControlRecordKey and EndTxnMarker), and parses back.
func TestControlBatchRoundTrip(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		m := Marker{ProducerID: 4242, ProducerEpoch: 7, CoordinatorEpoch: 3, Type: typ}
		b := BuildControl(m, 1700000000000)
		info, ok, err := Next(b)
		if err != nil || !ok || !info.Control || !info.Transactional || info.ProducerID != 4242 || info.ProducerEpoch != 7 || info.BaseSequence != -1 || info.Size != len(b) {
			t.Fatalf("%v: NextBatch = %+v %v %v", typ, info, ok, err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes != 0x30 || rb.NumRecords != 1 {
			t.Fatalf("attributes %#x, %d records", rb.Attributes, rb.NumRecords)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		var val kmsg.EndTxnMarker
		if err := key.ReadFrom(rec.Key); err != nil || key.Version != 0 || int16(key.Type) != int16(typ) {
			t.Fatalf("key %+v %v", key, err)
		}
		if err := val.ReadFrom(rec.Value); err != nil || val.Version != 0 || val.CoordinatorEpoch != 3 {
			t.Fatalf("value %+v %v", val, err)
		}
		got, err := ParseControl(b)
		if err != nil || got != m {
			t.Fatalf("ParseControlBatch = %+v, %v; want %+v", got, err, m)
		}
	}
}

func TestParseControlBatchRefusesData(t *testing.T) {
	b := BuildControl(Marker{ProducerID: 1, Type: ControlCommit}, 0)
	b[AttrAt+1] &^= AttrControl // now a data batch; CRC fixed below
	SetCRC(b)
	if _, err := ParseControl(b); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("data batch parsed as a marker: %v", err)
	}
}
