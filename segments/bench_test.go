package segments

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// benchBatch is 100 records of 1 KiB, the append benchmarks' unit.
func benchBatch() []byte { return valueBatch(100, 1024, 1_700_000_000_000) }

// BenchmarkAppend compares appending 1 KiB records in batches of 100 with
// writing the same bytes to a plain file, in the same run:
//
//   - plain-file: sequential writes, fsync and a new file every segment.bytes;
//   - log/flush-on-roll: Append with the default flush policy (fsync on roll);
//   - plain-file-fsync-each: a write and fsync per batch;
//   - log/fsync-each: Append with flush.messages=1.
func BenchmarkAppend(b *testing.B) {
	const segBytes = 128 << 20
	batch := benchBatch()
	b.Run("plain-file", func(b *testing.B) { benchPlainFile(b, batch, segBytes, false) })
	b.Run("log/flush-on-roll", func(b *testing.B) { benchLogAppend(b, batch, segBytes, 0) })
	b.Run("plain-file-fsync-each", func(b *testing.B) { benchPlainFile(b, batch, segBytes, true) })
	b.Run("log/fsync-each", func(b *testing.B) { benchLogAppend(b, batch, segBytes, 1) })
	b.Run("log/fsync-each-4-appenders", func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.SegmentBytes = segBytes
		cfg.FlushMessages = 1
		l := mustOpen(b, b.TempDir(), cfg, Options{})
		defer l.Close()
		b.SetBytes(int64(len(batch)))
		b.SetParallelism(2) // 2 per CPU: 4 appenders on the 2-core VM
		b.RunParallel(func(pb *testing.PB) {
			mine := bytes.Clone(batch)
			for pb.Next() {
				if _, err := l.Append(mine, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAppendRatio interleaves, op by op, a log append and a plain-file
// write of the same batch (each rolling and fsyncing every 128 MiB, or
// fsyncing every batch), so both see the same disk conditions, and reports
// the log's rate as a fraction of the plain file's.
func BenchmarkAppendRatio(b *testing.B) {
	for _, tc := range []struct {
		name          string
		flushMessages int64
	}{{"flush-on-roll", 0}, {"fsync-each", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			const segBytes = 128 << 20
			batch := benchBatch()
			cfg := DefaultConfig()
			cfg.SegmentBytes = segBytes
			cfg.FlushMessages = tc.flushMessages
			l := mustOpen(b, b.TempDir(), cfg, Options{})
			defer l.Close()
			plain := newPlainLog(b, segBytes, tc.flushMessages == 1)
			defer plain.close()
			b.SetBytes(int64(2 * len(batch)))
			var inLog, inPlain time.Duration
			for b.Loop() {
				t0 := time.Now()
				plain.write(batch)
				t1 := time.Now()
				if _, err := l.Append(batch, 1); err != nil {
					b.Fatal(err)
				}
				inPlain, inLog = inPlain+t1.Sub(t0), inLog+time.Since(t1)
			}
			b.ReportMetric(float64(inPlain)/float64(inLog), "log/plain-rate")
		})
	}
}

// plainLog writes batches to numbered plain files, fsyncing and starting a
// new one every segBytes, or fsyncing every write.
type plainLog struct {
	b        *testing.B
	dir      string
	segBytes int64
	syncEach bool
	f        *os.File
	written  int64
	n        int
}

func newPlainLog(b *testing.B, segBytes int64, syncEach bool) *plainLog {
	p := &plainLog{b: b, dir: b.TempDir(), segBytes: segBytes, syncEach: syncEach}
	p.next()
	return p
}

func (p *plainLog) next() {
	p.close()
	var err error
	if p.f, err = os.Create(filepath.Join(p.dir, fmt.Sprintf("%d.log", p.n))); err != nil {
		p.b.Fatal(err)
	}
	p.n++
	p.written = 0
}

func (p *plainLog) close() {
	if p.f == nil {
		return
	}
	if err := p.f.Sync(); err != nil {
		p.b.Fatal(err)
	}
	p.f.Close()
	p.f = nil
}

func (p *plainLog) write(batch []byte) {
	if p.written+int64(len(batch)) > p.segBytes {
		p.next()
	}
	if _, err := p.f.Write(batch); err != nil {
		p.b.Fatal(err)
	}
	p.written += int64(len(batch))
	if p.syncEach {
		if err := p.f.Sync(); err != nil {
			p.b.Fatal(err)
		}
	}
}

func benchPlainFile(b *testing.B, batch []byte, segBytes int64, syncEach bool) {
	dir := b.TempDir()
	b.SetBytes(int64(len(batch)))
	var f *os.File
	var written int64
	newFile := func(i int) {
		if f != nil {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		var err error
		if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%d.log", i))); err != nil {
			b.Fatal(err)
		}
		written = 0
	}
	newFile(0)
	for i := 0; b.Loop(); i++ {
		if written+int64(len(batch)) > segBytes {
			newFile(i)
		}
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
		if syncEach {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	f.Close()
}

func benchLogAppend(b *testing.B, batch []byte, segBytes, flushMessages int64) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.FlushMessages = flushMessages
	l := mustOpen(b, b.TempDir(), cfg, Options{})
	defer l.Close()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads 1 MiB chunks of a 64 MiB log and writes them to a
// loopback TCP socket through Chunk.WriteTo (sendfile), against the plain
// file copied to the same socket by io.Copy (which Go also does with
// sendfile), and through Chunk.Bytes.
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	dir := b.TempDir()
	l := mustOpen(b, dir, cfg, Options{})
	defer l.Close()
	batch := benchBatch()
	for l.Size() < 64<<20 {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	conn, stop := sinkConn(b)
	defer stop()
	const chunk = 1 << 20
	end := l.EndOffset()
	b.Run("log/sendfile", func(b *testing.B) {
		b.SetBytes(chunk)
		off := int64(0)
		for b.Loop() {
			c, err := l.Read(off, chunk, -1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.WriteTo(conn); err != nil {
				b.Fatal(err)
			}
			off = nextOff(c, len(batch), off, end)
			c.Close()
		}
	})
	b.Run("plain-file/io.Copy", func(b *testing.B) {
		f, err := os.Open(filepath.Join(dir, segmentName(0, logSuffix)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(chunk)
		pos := int64(0)
		for b.Loop() {
			if _, err := f.Seek(pos, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(conn, io.LimitReader(f, chunk)); err != nil {
				b.Fatal(err)
			}
			if pos += chunk; pos+chunk > 16<<20 {
				pos = 0
			}
		}
	})
	b.Run("log/bytes", func(b *testing.B) {
		b.SetBytes(chunk)
		off := int64(0)
		for b.Loop() {
			c, err := l.Read(off, chunk, -1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Bytes(); err != nil {
				b.Fatal(err)
			}
			off = nextOff(c, len(batch), off, end)
			c.Close()
		}
	})
}

// nextOff returns the offset after chunk c read at off (every batch holds
// 100 records and has the same size), wrapping to 0.
func nextOff(c Chunk, batchLen int, off, end int64) int64 {
	next := off + int64(c.Len()/batchLen)*100
	if next >= end {
		return 0
	}
	return next
}

// sinkConn returns a loopback TCP connection whose peer discards everything.
func sinkConn(b *testing.B) (net.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c)
		c.Close()
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return conn, func() { conn.Close(); ln.Close(); <-done }
}

// BenchmarkOpenLogs opens many small logs (10,000 with RUNNEL_BENCH=1, else
// 1,000) sharing one FileCache, after a clean and after an unclean shutdown.
// One op opens them all.
func BenchmarkOpenLogs(b *testing.B) {
	n := 1000
	if os.Getenv("RUNNEL_BENCH") != "" {
		n = 10000
	}
	root := b.TempDir()
	files := NewFileCache(256)
	cfg := DefaultConfig()
	dirs := make([]string, n)
	batch := valueBatch(10, 100, 1)
	for i := range dirs {
		dirs[i] = filepath.Join(root, fmt.Sprint(i))
		l := mustOpen(b, dirs[i], cfg, Options{Files: files})
		for j := 0; j < 5; j++ {
			if _, err := l.Append(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
		l.Close()
	}
	openAll := func(b *testing.B, clean bool) {
		for b.Loop() {
			for _, d := range dirs {
				l := mustOpen(b, d, cfg, Options{Files: files})
				if clean {
					l.Close()
				} else {
					abandon(l)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/log")
	}
	b.Run(fmt.Sprintf("clean/%d", n), func(b *testing.B) { openAll(b, true) })
	// Leave every log's state unclean, as after a crash.
	for _, d := range dirs {
		l := mustOpen(b, d, cfg, Options{Files: files})
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
		abandon(l)
	}
	b.Run(fmt.Sprintf("unclean/%d", n), func(b *testing.B) { openAll(b, false) })
}

// BenchmarkUncleanOpen opens, as after a crash, a log whose active segment
// holds 4 MiB of transactional batches (Sync'd, never closed): the
// recovery scan reads it and the transaction rebuild replays it. One op is
// one open; MB/s is of the segment.
func BenchmarkUncleanOpen(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "p")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	l := mustOpen(b, dir, cfg, Options{})
	for i := 0; l.Size() < 4<<20; i++ {
		mustAppend(b, l, txnBatch(int64(i%8), 0, 50), 0)
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(l.Size())
	abandon(l)
	for b.Loop() {
		abandon(mustOpen(b, dir, cfg, Options{})) // the open leaves the state file as it was: unclean again
	}
}

// abandon drops l as a crash would: no flush, no clean mark, files released.
func abandon(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.forgetFilesLocked()
}

// BenchmarkNewEpochAppend is a broker taking over many partitions at once
// (issue 19: a node leading 10,000 partitions killed): n open logs on the
// OS filesystem, each holding synced data, each get one append in a new
// leader epoch per round; µs/log is the time of that append, fsyncs/log
// the fsyncs it did (files and directories).
func BenchmarkNewEpochAppend(b *testing.B) {
	n := 2000
	if s := os.Getenv("RUNNEL_BENCH_LOGS"); s != "" {
		fmt.Sscan(s, &n)
	}
	root := b.TempDir()
	var syncs atomic.Int64
	fs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			syncs.Add(1)
		}
		return nil
	})
	opts := Options{FS: fs, Files: NewFileCache(256)}
	logs := make([]*Log, n)
	batch := valueBatch(5, 100, 1)
	for i := range logs {
		logs[i] = mustOpen(b, filepath.Join(root, fmt.Sprint(i)), DefaultConfig(), opts)
		for range 3 {
			if _, err := logs[i].Append(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := logs[i].Sync(); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	epoch := int32(0)
	syncs.Store(0)
	for b.Loop() {
		epoch++
		for _, l := range logs {
			if _, err := l.Append(batch, epoch); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/log")
	b.ReportMetric(float64(syncs.Load())/float64(b.N*n), "fsyncs/log")
}

// timedSync is an FSSync that adds up the time its syncs take.
type timedSync struct {
	vfs.FSSync
	took time.Duration
}

func (s *timedSync) Sync() error {
	start := time.Now()
	err := s.FSSync.Sync()
	s.took += time.Since(start)
	return err
}

// BenchmarkCloseAll closes many written logs (one small batch each: 2,000,
// 20,000 with RUNNEL_BENCH=1) with CloseAll on the OS's filesystem, the
// clean close (RescanBytes -1) and the default (left to rescan) in turn,
// several rounds alternated: per log, the whole CloseAll, the part of it in
// filesystem syncs, and the next open with a read of each log (the
// rescan's cost).
func BenchmarkCloseAll(b *testing.B) {
	n := 2000
	if os.Getenv("RUNNEL_BENCH") != "" {
		n = 20000
	}
	fsys := vfs.OSFS()
	syncer, ok := vfs.AsFSSyncer(fsys)
	if !ok {
		b.Skip("no filesystem sync here")
	}
	root := b.TempDir()
	files := NewFileCache(256)
	batch := valueBatch(1, 100, 1)
	type figures struct{ close, sync, open time.Duration }
	round := func(b *testing.B, rescan int64, sub string) figures {
		cfg := DefaultConfig()
		cfg.RescanBytes = rescan
		h, err := syncer.OpenFSSync(root)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		ts := &timedSync{FSSync: h}
		if err := fsys.MkdirAll(filepath.Join(root, sub)); err != nil {
			b.Fatal(err)
		}
		logs := make([]Closing, n)
		for i := range logs {
			l, err := Create(filepath.Join(root, sub, fmt.Sprint(i)), cfg, Options{FS: fsys, Files: files})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Append(bytes.Clone(batch), 0); err != nil {
				b.Fatal(err)
			}
			logs[i] = Closing{Log: l}
		}
		start := time.Now()
		if err := CloseAll(ts, logs, 16); err != nil {
			b.Fatal(err)
		}
		f := figures{close: time.Since(start), sync: ts.took}
		start = time.Now()
		for _, c := range logs {
			l := mustOpen(b, c.Log.dir, cfg, Options{FS: fsys, Files: files})
			readAll(b, l, 0, 1<<20)
			abandon(l)
		}
		f.open = time.Since(start)
		return f
	}
	var clean, rescan figures
	for b.Loop() {
		for r := range 2 {
			c := round(b, -1, fmt.Sprintf("clean-%d-%d", b.N, r))
			s := round(b, 0, fmt.Sprintf("rescan-%d-%d", b.N, r))
			clean.close, clean.sync, clean.open = clean.close+c.close, clean.sync+c.sync, clean.open+c.open
			rescan.close, rescan.sync, rescan.open = rescan.close+s.close, rescan.sync+s.sync, rescan.open+s.open
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(2*b.N*n) }
	b.ReportMetric(per(clean.close), "clean-close-µs/log")
	b.ReportMetric(per(clean.sync), "clean-sync-µs/log")
	b.ReportMetric(per(clean.open), "clean-reopen-µs/log")
	b.ReportMetric(per(rescan.close), "rescan-close-µs/log")
	b.ReportMetric(per(rescan.sync), "rescan-sync-µs/log")
	b.ReportMetric(per(rescan.open), "rescan-reopen-µs/log")
	b.ReportMetric(float64(rescan.close)/float64(clean.close), "close-ratio")
	b.ReportMetric(float64(rescan.open)/float64(clean.open), "reopen-ratio")
}

// BenchmarkCreateLogsConcurrently is a follower's first records of many
// new partitions (issue 19): n logs created and appended to once, by one
// goroutine and by 16 (the broker's replica apply workers), sharing one
// FileCache of 1,024 (--max-open-files' default), so each new segment file
// pushes another out. One op creates them all; µs/log is the wall time per
// log.
func BenchmarkCreateLogsConcurrently(b *testing.B) {
	n := 2000
	if os.Getenv("RUNNEL_BENCH") != "" {
		n = 20000
	}
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { createLogsConcurrently(b, n, workers) })
	}
}

func createLogsConcurrently(b *testing.B, n, workers int) {
	root := b.TempDir()
	files := NewFileCache(1024)
	cfg := DefaultConfig()
	batch := valueBatch(1, 100, 1)
	round := 0
	var mu sync.Mutex
	var logs []*Log // kept open, as the broker keeps them, until the end
	defer func() {
		for _, l := range logs {
			abandon(l)
		}
	}()
	for b.Loop() {
		round++
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					l, err := Create(filepath.Join(root, fmt.Sprintf("%d-%d", round, i)), cfg, Options{Files: files})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := l.AppendReplicated(slices.Clone(batch)); err != nil {
						b.Error(err)
					}
					mu.Lock()
					logs = append(logs, l)
					mu.Unlock()
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/log")
}
