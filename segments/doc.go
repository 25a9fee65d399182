// Package segments is one partition's log on disk: Kafka RecordBatch v2
// bytes stored exactly as received, split into segment files, with sparse
// offset and time indexes, crash recovery, retention and compaction. It
// knows nothing of HTTP, Kafka or Raft; the batch format itself (header,
// CRC, records, compression, control batches) is package recordbatch's,
// the one codec of it.
//
// # Use
//
// Open a Log per partition directory with a Config (start from
// DefaultConfig) and Options (a shared FileCache bounds open descriptors
// across all logs of a process; a shared TailCache, when given, bounds the
// memory of the logs' in-memory tails). Append takes one or more concatenated
// producer batches, validates every record of them (as Kafka's log
// validator does: compressed records inflated as a stream, at most
// Config.MaxInflatedBytes; a raw snappy block or a zstd frame of at most
// 1 MiB, whose size is known up front, is inflated whole into a pooled
// buffer and walked in place), and assigns offsets and the leader epoch
// in place; AppendReplicated takes a leader's batches as they are,
// checking headers only. Readers that need records decoded use
// recordbatch.Next and recordbatch.Decode (DecodeNext for the batch Next
// just checked, without checking its CRC again), which inflate no further
// than they read. Read returns a
// Chunk of whole batches that a Kafka Fetch can send with sendfile, or,
// when the offset falls among the latest batches of the active segment
// that the log keeps in memory (its tail, tail.go: a copy of each append,
// dropped when the bytes under it change or go, within the TailCache's
// budget), from memory with no file opened. Every
// Log method is safe for concurrent use; Maintain (time roll, flush.ms,
// retention, compaction) is meant to be called periodically by one owner.
// The package starts one goroutine per log at most: the one a roll starts
// to flush the sealed segment, which ends when nothing is pending (Close
// waits for it). Lock order within a log: maintainMu, syncMu, Log.mu,
// then FileCache.mu or TailCache.mu (each held for bookkeeping only,
// never across I/O; neither takes a Log.mu).
//
// # Directory layout
//
// A log directory holds:
//
//	00000000000000000000.log        segment: batches with offsets from its base
//	00000000000000000000.index      sparse offset index of a sealed segment
//	00000000000000000000.timeindex  time index of a sealed segment
//	00000000000000000000.txnindex   transactions: open at the base, aborted
//	log.state                       recovery point, log start offset, leader
//	                                epochs, clean mark
//
// A directory written by a release before leader epochs moved into
// log.state also holds leader-epoch-checkpoint (leader epoch -> first
// offset, Kafka's text format: a version line "0", a count line, then one
// "epoch startOffset" line per epoch) beside a log.state of version 1.
// Open reads the epochs from it then, and removes it once a log.state of
// version 2 or later is durable (not durably: a crash may bring it back,
// and beside a file of version 2 or later it is ignored).
//
// File names are the segment's base offset, zero-padded to 20 digits. Files
// ending in ".tmp" (a checkpoint being replaced) or ".cleaned" (a segment
// being compacted) are leftovers of an interrupted operation and are deleted
// by Open, as are index files whose segment is gone. The OS filesystem
// creates files 0600 and directories 0700: records are for the broker's user
// only.
//
// # Segment files
//
// A segment is a sequence of Kafka RecordBatch v2 (magic 2) byte for byte,
// with nothing between them (the format is recordbatch's package doc). The
// 61-byte header, all integers big-endian, as the log uses it:
//
//	 0  int64  baseOffset            assigned by the log on Append
//	 8  int32  batchLength           bytes after this field
//	12  int32  partitionLeaderEpoch  assigned by the log on Append
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
// A control batch (attributes bits 4 and 5) is a transaction marker
// written by a transaction coordinator: one uncompressed record whose key is
// int16 version 0 and int16 type (0 abort, 1 commit) and whose value is
// int16 version 0 and int32 coordinator epoch (recordbatch.BuildControl,
// recordbatch.ParseControl).
//
// baseOffset and partitionLeaderEpoch lie outside the CRC, so assigning them
// leaves the producer's bytes and CRC valid. A batch holds the offsets
// baseOffset..baseOffset+lastOffsetDelta; base offsets increase strictly
// through a segment and across segments, and every offset of a segment is
// below the next segment's base. Compaction can leave gaps (a batch with
// fewer records than offsets, or offsets with no batch). A segment rolls
// when the next append would pass segment.bytes, segment.ms has passed since
// its first append, or an offset would not fit 32 bits relative to its base.
//
// # Index files
//
// Both indexes are written whole when a segment is sealed (rolled, or the
// active one on a clean Close), through a temporary file, fsync and rename.
// While a segment is active its indexes live in memory. Each file is its
// entries followed by a uint32 CRC-32C (Castagnoli, big-endian) of them.
//
// The offset index (.index) is a sequence of 8-byte entries: uint32 offset
// of a batch relative to the segment base, uint32 byte position of that
// batch. The first batch is always indexed, then the first batch starting
// index.interval.bytes or more after the last indexed one. Entries increase
// strictly in both fields.
//
// The time index (.timeindex) is a sequence of 12-byte entries: int64
// timestamp T, uint32 relative offset R, meaning that every batch of the
// segment with a base offset below base+R has a max timestamp <= T. An entry
// is added with each offset entry when the running max timestamp of the
// batches before it has grown; the file ends with one more entry (segment
// max timestamp, relative offset after the last batch), dropped on load.
// Both fields increase.
//
// An index is trusted only when its checksums match and it is consistent
// with its segment: sizes a multiple of the entry size (plus the
// checksum), entries increasing and inside the file (time entries at most
// at the offset after the last batch), the last offset entry pointing at a
// batch with that base offset, and the batch headers after it ending
// exactly at the end of the file. Otherwise, or when missing, it is
// rebuilt from the segment (a Warn line) and written anew. A file of a
// release before the checksum (its size a multiple of the entry size) is
// rebuilt the same way on the segment's first use, once, and written with
// it (one Info line per process, a Debug line per segment). An index whose checksum matches can still disagree
// with a segment changed under it: each offset entry a read, a timestamp
// lookup or a Truncate starts or jumps from is checked against the batch
// header at its position (which it reads anyway), and one that is not at
// its batch has the index rebuilt and the operation done from that. A
// time entry's timestamp is covered by the checksum only: one that is
// wrong for its segment can make a timestamp lookup answer a later record
// (see FuzzIndexFiles).
//
// # Transactions
//
// A transactional data batch (attributes bit 4, producer id >= 0) opens a
// transaction of its producer at its base offset when none is open; a
// control batch of that producer closes it (see the marker above). The log
// keeps the transactions open at its end: FirstUnstableOffset is the
// smallest first offset among them (the log end when none), below which a
// read_committed reader may read. An abort marker adds an entry to the
// aborted-transactions index of the segment holding it (AbortedTxns).
//
// The .txnindex file of a segment, big-endian: "RTXI", uint8 version 1,
// uint32 B, int64 E, uint32 N, uint32 A; then B entries (int64 producer id,
// int16 epoch, int64 first offset) for the transactions open at the
// segment's base, N such entries for those open at offset E (written with
// E = the log end by a clean Close; E = -1 and N = 0 otherwise), A entries
// (int64 producer id, first offset, last offset = the abort marker's, last
// stable offset right after it); then a CRC-32C of all bytes before it. It
// is written atomically when the segment is created by a roll (B only), when
// it is sealed, at a clean Close and when it becomes the oldest segment. A
// sealed segment's file is trusted when its CRC matches; a missing or bad
// one is rebuilt by replaying the segment from the state at its base (from
// the previous segment's file, recursively; empty for the first segment).
// After a crash the segments from the one holding the recovery point are
// replayed, after Truncate the segment holding the cut. Once older
// segments are gone, a lost file of the oldest segment is rebuilt as if no
// transaction was open at its base (nothing else could tell). Compaction
// keeps control batches, drops records of aborted transactions (they never
// hide a committed record of their key) and does not clean segments at or
// past the first unstable offset.
//
// # Checkpoints
//
// log.state is text (package segments/statefile is its codec), replaced
// atomically (temporary file, fsync, rename, directory fsync):
//
//	runnel-log-state 4
//	recovery-point <offset>      every batch below it was fsynced
//	start-offset <offset>        the log start offset (DeleteRecordsBefore)
//	restarting                   version 3 and 4 only, no epoch or clean
//	                             line: the log is being emptied and
//	                             restarted at its start offset
//	epoch <epoch> <offset>       zero or more: leader epoch <epoch> wrote its
//	                             first record at <offset>; epochs increase,
//	                             offsets do not decrease
//	clean <end> <base> <size>    only after a clean Close: end offset, base
//	                             and size of the last segment
//	end <crc>                    CRC-32C (Castagnoli) of every byte before
//	                             this line, 8 lowercase hex digits
//
// Versions 1 to 3 (earlier releases) end in a bare "end" line, with no
// checksum; version 1 has no epoch lines, version 2 no restarting line.
// They are read, and replaced by a version-4 file at the next write. The
// clean line is removed (the file rewritten) before the first change after
// Open.
//
// A state file that does not parse, or whose checksum does not match (a
// bit flipped on disk), is not trusted at all: Open logs a warning and
// takes the path of a log without one. It recovers every segment from the
// first (the clean mark is not used), takes the leader epochs from the
// batches, and starts the log at the base of its oldest segment, since the
// saved log start offset cannot be told from a corrupt one: records that
// DeleteRecordsBefore hid but retention had not yet removed are readable
// again until the next DeleteRecordsBefore. Every durable byte is kept
// (TestOpenDistrustsFlippedStateFile). A restarting line is lost with the
// rest: the leftovers of a restart cut short are recovered as the old log.
//
// Downgrade: a release that reads versions 1 to 3 only finds every
// version-4 file malformed (the checksum in the end line), and opens every
// log as above: the whole log rescanned once, the log start offset back at
// the oldest segment's base, a restart cut short not finished. No version
// without the checksum is written any more: no file of version 4 could be
// read by such a release, whatever it holds.
//
// A Reset, or a Truncate below the log start offset, empties the log and
// restarts it at a new start offset: it writes a state file with the
// restarting line before it removes the first segment file, and one
// without it once the new empty segment and the directory are durable. A
// crash in between leaves old segments, possibly under the new start
// offset; Open, finding the restarting line, removes them and finishes the
// restart instead of recovering them, so the log opens as the old one or
// the new empty one, never a mix (TestRestartPowerCutAnywhere).
//
// The epoch lines are the log's leader epochs when the file was written,
// and always hold every epoch starting below its recovery point (Truncate
// saves a recovery point no higher than the end its cut leaves, with the
// epochs below it). A new epoch's first append (Append, AppendReplicated)
// writes no file: an unclean Open keeps the epochs below the recovery
// point and takes the others from the partitionLeaderEpoch of the batches
// it replays that end at or past it (the first batch of each epoch newer
// than the ones before). Compaction rewrites no segment at or past the
// saved recovery point (it saves the state file first when that point lags
// behind), so those batches are the ones appended. The epochs are then
// trimmed: those starting at or past the end offset go, and those before
// the log start offset collapse into one starting there.
//
// A log never written holds its empty first segment file alone, whether it
// was just created (without fsyncs) or opened and closed since: no state,
// index or checkpoint file, so an empty partition costs a directory and an
// inode. Its first append makes the directory durable as a new log's does.
//
// # Durability and recovery
//
// Appends are written with pwrite at the end of the active segment; a failed
// write is cut back and, like a failed fsync, makes the log refuse every
// later change (errors wrap ErrStorage) until it is reopened or Recover
// succeeds: Recover probes the disk with a write and fsync, reopens the
// directory in place with the recovery below, and rewrites and fsyncs what
// lies past the saved recovery point (after a failed fsync the page cache
// may hold pages the kernel will not write again). flush.messages=1 fsyncs before Append
// returns; flush.messages and flush.ms otherwise bound the unsynced records
// and their age. A roll seals the segment without any fsync under the
// log's lock, so a slow disk does not stall the partition's appends and
// reads; the log's own goroutine (started by the roll, awaited by Close)
// then fsyncs the sealed segment, writes its index files, fsyncs the
// directory (the new segment's entry too) and saves the state file, and
// only then does the recovery point move to the new segment. Maintain's
// flush.ms fsync and the first fsync of a log made by Create (its
// directory and state file before its data) also run without the lock,
// and a segment.ms roll's flush is done before retention may delete that
// segment. A failed flush is sticky like a failed append fsync. Anything that fsyncs later
// data (flush.messages, flush.ms, Sync, Close) or changes sealed segments
// (Truncate, Reset, DeleteRecordsBefore) first waits for or does the
// pending flushes, so the recovery point never passes a sealed segment
// that is not durable, and a crash at any point rescans from it.
// Retention flushes, without the lock, the rolls pending when it starts
// and leaves alone the segments of rolls queued meanwhile (flushing those
// under the lock held a slow disk's appends every maintenance pass).
// The directory is fsynced after a segment file is renamed or removed, and
// after one is created before any of its bytes are fsynced.
// A power cut can still leave a sealed segment below the saved recovery
// point without its roll's flush (the recovery point was checkpointed at
// its end, and the next segment's entry became durable with some other
// directory fsync): its .txnindex is then one written while it was active
// (at its roll, a clean close, or by Truncate in place of a sealed one),
// marked so, and its aborted transactions are rebuilt by a replay instead.
//
// CloseAll closes many logs with the durability of each one's Close, but
// syncs the filesystem (vfs.FSSyncer: syncfs(2), through a handle opened
// before the logs were written, so it reports their write errors) in place
// of each log's fsyncs. A written log whose segments from the recovery
// point in its state file on (from the first segment when it has none)
// hold at most Config.RescanBytes (256 KiB by default), and whose
// caller's side files may stay as they are (SideFile.Optional), gets
// nothing written at all: the sync makes its data and directory entries
// durable, and its next Open recovers it from that recovery point, as
// after a crash, scanning those bytes (no write or fsync unless a tail is
// torn; a stale index file of the active segment from an earlier clean
// close is not read). Any other written log gets a clean close: every file
// it writes (the active segment's index files, its .txnindex, the
// caller's side files, the state file with the clean line and a recovery
// point at the end) is written beside its name, the filesystem synced,
// the index and side files renamed into place, synced, then the state
// files renamed, synced. One sync in all when no log needs a clean close,
// three otherwise. A crash before the first sync leaves every log as
// before its close (the ".tmp" files are removed by Open); after it, no
// byte of any log is lost. A written log's Close is about a dozen fsyncs,
// each a commit of the filesystem's journal: 20,000 logs closed one after
// another took minutes; creating and renaming a clean close's four small
// files cost ~2 ms a log on ext4, 60 s for 30,000.
//
// Open with a valid clean line reads no segment (the open transactions
// come from the active segment's .txnindex on first use): the end offset comes from
// the state file and indexes are loaded lazily. Otherwise it scans the
// segments from the one holding the recovery point to the last, checking
// every batch (length, magic, CRC-32C, record count, increasing offsets),
// truncates at the first bad or torn batch, deletes any later segment, and
// rebuilds those segments' indexes. Segments below the recovery point are
// not read. The recovered bytes past the recovery point were not fsynced
// by the process that wrote them (a kill -9 leaves them in the page
// cache only): the recovery point stays where the state file had it, each
// sealed segment holding such bytes is queued as a roll's flush is, and
// the active segment's count as unflushed appends. The open itself does
// no fsync; the first fsync the log's flush policy, a Sync, Close, a roll
// or a change to sealed segments asks for covers them (a sealed one by
// its own flush, not by the active segment's fsync), and no checkpoint
// records a recovery point over them before then.
package segments
