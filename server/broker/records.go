package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producers"
)

// Record batches are Kafka's RecordBatch v2 on disk and on the wire. This file
// views their headers for the producer table and replication; batches are
// built (recordbatch.Build for records that arrive over HTTP), checked
// (recordbatch.Next), validated (on append) and decoded (for HTTP consumers)
// by package recordbatch, the one RecordBatch codec. Kafka clients get the
// stored bytes untouched.

// Record is one record with its position, as decoded from a batch.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
	// Transactional: the record's batch belongs to a transaction (the
	// HTTP consume and the UI mark it).
	Transactional bool
	// Control is set when the record is a transaction marker (HTTP reads
	// that ask for markers); Key, Value and Headers are then nil.
	Control *recordbatch.Marker
}

// batchView is the header of one batch in a byte stream of concatenated batches.
type batchView struct {
	Raw        []byte // the whole batch
	baseOffset int64
	Attrs      int16
	lastDelta  int32
	firstTS    int64
	maxTS      int64
	ProducerID int64
	epoch      int16
	firstSeq   int32
	NumRecords int32
}

func (b batchView) IsControl() bool  { return b.Attrs&recordbatch.AttrControl != 0 }
func (b batchView) Idempotent() bool { return b.ProducerID >= 0 && !producers.IsKeyID(b.ProducerID) }
func (b batchView) records() []byte  { return b.Raw[recordbatch.HeaderLen:] }

// WalkBatches calls fn with each whole batch of concatenated batches and
// its header, checking their framing, CRC and header counts
// (recordbatch.Next; errors wrap recordbatch.ErrCorruptBatch). A partial
// batch at the end (as a fetch response may carry) is dropped.
func WalkBatches(data []byte, fn func(raw []byte, info recordbatch.Info) error) error {
	for {
		info, ok, err := recordbatch.Next(data)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := fn(data[:info.Size], info); err != nil {
			return err
		}
		data = data[info.Size:]
	}
}

// splitBatches is WalkBatches with each batch's header as a batchView.
func splitBatches(data []byte, fn func(batchView) error) error {
	return WalkBatches(data, func(raw []byte, info recordbatch.Info) error {
		return fn(batchView{Raw: raw, baseOffset: info.BaseOffset, Attrs: info.Attributes,
			lastDelta: int32(info.LastOffset - info.BaseOffset), firstTS: info.FirstTimestamp, maxTS: info.MaxTimestamp,
			ProducerID: info.ProducerID, epoch: info.ProducerEpoch, firstSeq: info.BaseSequence, NumRecords: info.NumRecords})
	})
}

// setLogAppendTime stamps batches with the broker's time, as Kafka does for
// message.timestamp.type=LogAppendTime, and recomputes their CRCs.
func setLogAppendTime(views []batchView, ts int64) {
	for _, b := range views {
		recordbatch.SetLogAppendTime(b.Raw, ts)
	}
}
