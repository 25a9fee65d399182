package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// TestFetchOfManyPartitionsPinsFewFiles (issue 19): a fetch answer holds
// every partition's chunk until it is written, and a chunk backed by its
// segment file pins that file open (segments.FileCache closes no pinned
// file). A follower back from a restart fetched one small batch from each
// of tens of thousands of partitions in one answer: the leader held one
// descriptor per partition, past the process's limit (20,000 here), and
// the next file anything opened failed with "too many open files" (the
// metadata log's segment rotation among them: that node's Raft log store
// failed, its metadata stopped at that index, and every ISR it led stayed
// one replica short). A small range is copied out and its file released at
// once: the files open stay within the cache's bound however many
// partitions one answer holds. A large range keeps its file (sendfile).
func TestFetchOfManyPartitionsPinsFewFiles(t *testing.T) {
	const parts, limit = 64, 8
	files := segments.NewFileCache(limit)
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: files, Logger: slog.New(slog.DiscardHandler)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("many", 1, parts+1, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte { return []byte(fmt.Sprint("record-of-", i)) }
	ps := make([]*Partition, parts+1)
	for i := range ps {
		if ps[i], err = b.Partition("many", int32(i)); err != nil {
			t.Fatal(err)
		}
		v := value(i)
		if i == parts { // one range too large to copy: it keeps its file
			v = bytes.Repeat([]byte{'L'}, 4*smallReadBytes)
		}
		if _, err := ps[i].append(recordbatch.Build([]recordbatch.NewRecord{{Value: v, Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}

	// As one fetch answer: every partition read, each chunk held until
	// the end. A follower's fetch, and a consumer's of either isolation.
	for _, door := range []struct {
		name string
		read func(p *Partition) (segments.Chunk, error)
	}{
		{"follower", func(p *Partition) (segments.Chunk, error) { return p.ReadReplica(0, 1<<20) }},
		{"consumer", func(p *Partition) (segments.Chunk, error) { return p.Read(0, 1<<20) }},
		{"read_committed consumer", func(p *Partition) (segments.Chunk, error) {
			c, _, _, err := p.ReadCommitted(0, 1<<20)
			return c, err
		}},
	} {
		held := make([]segments.Chunk, parts)
		for i := range parts {
			if held[i], err = door.read(ps[i]); err != nil {
				t.Fatalf("%s read of partition %d: %v", door.name, i, err)
			}
		}
		if n := files.OpenFiles(); n > limit {
			t.Errorf("%s: %d files open while one answer holds %d partitions' small chunks, want at most the cache's %d",
				door.name, n, parts, limit)
		}
		for i, c := range held {
			got, err := c.Bytes()
			if err != nil || !bytes.Contains(got, value(i)) {
				t.Fatalf("%s: partition %d's held chunk: %q, %v", door.name, i, got, err)
			}
			var buf bytes.Buffer
			if _, err := c.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), got) {
				t.Fatalf("%s: partition %d's chunk written: %q, %v; its bytes %q", door.name, i, buf.Bytes(), err, got)
			}
			c.Close()
		}
		large, err := door.read(ps[parts])
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := large.(segments.FileRange); !ok || large.Len() < 4*smallReadBytes {
			t.Errorf("%s: a %d-byte range is a %T, want its file's range (sendfile)", door.name, large.Len(), large)
		}
		large.Close()
	}
}
