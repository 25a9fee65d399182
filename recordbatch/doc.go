// Package recordbatch is runnel's one codec of Kafka's RecordBatch v2 (magic
// 2), the bytes a producer sends, the log stores and a fetch returns: the
// header layout and its CRC-32C, batch checks, record parsing and
// validation, decompression as a bounded stream, the records readers decode,
// control batches (transaction markers), and the few writers (a batch built
// from records, a compacted batch rebuilt, a stamped LogAppendTime or
// producer). Every package that reads or writes batch bytes goes through it
// (the log in segments, the data plane in server/broker, the server's
// doors), so a corrupt batch is refused the same way everywhere and errors
// come from one set (ErrCorruptBatch, ErrBatchTooLarge, ErrInvalidRecord,
// ErrInflatedTooLarge). It is a leaf: it imports no runnel package, knows
// nothing of files, partitions or the wire protocol around a batch, and
// starts no goroutine. It is a package of its own, not part of segments,
// because the doors and the data plane decode batches that never reach a
// log (HTTP produce, replication, producer state), and a leaf keeps them
// from depending on the storage engine to do so.
//
// # Header
//
// All integers big-endian; the *At constants are these offsets:
//
//	 0  int64  baseOffset            assigned by the log on append
//	 8  int32  batchLength           bytes after this field
//	12  int32  partitionLeaderEpoch  assigned by the log on append
//	16  int8   magic                 2
//	17  uint32 crc                   CRC-32C (Castagnoli) of bytes 21..end
//	21  int16  attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	23  int32  lastOffsetDelta
//	27  int64  baseTimestamp
//	35  int64  maxTimestamp
//	43  int64  producerId
//	51  int16  producerEpoch
//	53  int32  baseSequence
//	57  int32  recordCount
//	61         records (compressed as a whole when the codec is not 0)
//
// baseOffset and partitionLeaderEpoch lie outside the CRC, so assigning them
// (SetBaseOffset, SetEpoch) leaves the producer's bytes and CRC valid; any
// other change is followed by SetCRC. A batch holds the offsets
// baseOffset..baseOffset+lastOffsetDelta; a producer's batch has exactly
// lastOffsetDelta+1 records (CountExact), a compacted one may have fewer
// (CountCompacted).
//
// The records, after decompression, are recordCount records back to back
// (records.go has the layout). A control batch (attributes bits 4 and 5) is
// a transaction marker written by a transaction coordinator: one
// uncompressed record whose key is int16 version 0 and int16 type (0 abort,
// 1 commit) and whose value is int16 version 0 and int32 coordinator epoch
// (BuildControl, ParseControl).
//
// # Use
//
// Next checks the header and CRC of the batch at the start of a byte
// stream and describes it (Info); Decode and DecodeNext then decode its
// records one at a time, inflating no further than the reader reads. A
// writer that appends producer batches uses Split (headers) then
// ValidateAll or ValidateRecords (every record, as Kafka's log validator
// does, compressed records inflated as a stream up to a limit); a log that
// walks stored batches uses ForEachRecord. None of these keep state
// between calls; a Records is not safe for concurrent use.
//
// # Files
//
//	batch.go     header layout, attribute bits, errors, Check, Split, Validate
//	records.go   the one record parser: validation, ForEachRecord, Next, Decode, Records
//	compress.go  gzip / snappy (raw and xerial) / lz4 / zstd as bounded streams, pooled
//	             decompressors (the package's only shared state: caches), Compress
//	control.go   control batches: BuildControl, ParseControl, Marker
//	build.go     the writers: SetCRC, Build, Rebuild, SetLogAppendTime, SetProducer
package recordbatch
