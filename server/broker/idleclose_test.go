package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// TestIdleLogFilesClose (issue 19): a maintenance round closes the files of
// logs no one used for Config.LogIdleTimeout, never a file a reader holds
// (it closes on a round after its release), and the logs' next reads and
// appends find their records; meanwhile a partition written and read
// without pause by other goroutines never sees an error (for -race).
func TestIdleLogFilesClose(t *testing.T) {
	files := segments.NewFileCache(64)
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: files, Logger: slog.New(slog.DiscardHandler),
		LogIdleTimeout: time.Nanosecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("idle", 4, 4, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	batch := func(v string) []byte {
		return recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(v), Timestamp: 1}})
	}
	parts := make([]*Partition, 4)
	for i := range parts {
		if parts[i], err = b.Partition("idle", int32(i)); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprint("first-", i)
		if i == 0 { // held below: a range too large to be copied out, so it pins its file
			v += strings.Repeat("x", 2*smallReadBytes)
		}
		if _, err := parts[i].append(batch(v)); err != nil {
			t.Fatal(err)
		}
	}
	held, err := parts[0].Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}

	// Partition 3 is busy throughout: appended to and read back.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprint("busy-", i)
			res, err := parts[3].append(batch(v))
			if err == nil {
				var c segments.Chunk
				if c, err = parts[3].Read(res.BaseOffset, 1<<20); err == nil {
					var got []byte
					got, err = c.Bytes()
					c.Close()
					if err == nil && !bytes.Contains(got, []byte(v)) {
						err = fmt.Errorf("read %d bytes at %d without %q", len(got), res.BaseOffset, v)
					}
				}
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 50 {
		b.maintain(context.Background(), time.Now())
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("the busy partition, while idle files were closed: %v", err)
	default:
	}

	b.maintain(context.Background(), time.Now())
	if n := files.OpenFiles(); n != 1 {
		t.Fatalf("%d files open after a maintenance round with every log idle but one read, want 1 (the read's)", n)
	}
	if got, err := held.Bytes(); err != nil || !bytes.Contains(got, []byte("first-0")) {
		t.Fatalf("the held read after its file's log went idle: %q, %v", got, err)
	}
	held.Close()
	b.maintain(context.Background(), time.Now())
	if n := files.OpenFiles(); n != 0 {
		t.Fatalf("%d files open after the last read ended and a round passed, want 0", n)
	}
	for i, p := range parts[:3] {
		if _, err := p.append(batch(fmt.Sprint("second-", i))); err != nil {
			t.Fatal(err)
		}
		c, err := p.Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Bytes()
		c.Close()
		if err != nil || !bytes.Contains(got, []byte(fmt.Sprint("first-", i))) || !bytes.Contains(got, []byte(fmt.Sprint("second-", i))) {
			t.Fatalf("partition %d after its files were closed: %q, %v", i, got, err)
		}
	}
}
