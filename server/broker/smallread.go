package broker

import (
	"bytes"
	"fmt"
	"io"

	"github.com/runnel/runnel/segments"
)

// A read returns a chunk of the log that its caller holds until it has
// written it: a fetch answer holds one per partition it carries. A chunk
// backed by its segment file pins that file open (segments.FileCache
// never closes a pinned file, whatever its bound), so an answer carrying a
// small batch from each of tens of thousands of partitions (a follower
// back from a restart, issue 19) held as many descriptors, past the
// process's limit; the next open anywhere in the node failed with "too
// many open files", the metadata log's segment rotation among them. A
// small range is copied out and its file released at once; the Kafka door
// copies a range that small into its answer anyway (kafkaproto's
// inlineChunk), so nothing that went out with sendfile is copied now.

// smallReadBytes is the largest range copied out of its file.
const smallReadBytes = 8 << 10

// unpinSmall returns c, when it is a small range of a file, as its bytes
// in memory, and releases the file.
func unpinSmall(c segments.Chunk, err error) (segments.Chunk, error) {
	if err != nil || c.Len() == 0 || c.Len() > smallReadBytes {
		return c, err
	}
	if _, ok := c.(segments.FileRange); !ok {
		return c, nil
	}
	b, err := c.Bytes()
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("copy a small read: %w", err)
	}
	return copiedChunk(b), nil
}

// copiedChunk is a read copied out of its segment file.
type copiedChunk []byte

func (c copiedChunk) Len() int               { return len(c) }
func (c copiedChunk) Bytes() ([]byte, error) { return c, nil }
func (c copiedChunk) Close() error           { return nil }
func (c copiedChunk) WriteTo(w io.Writer) (int64, error) {
	return bytes.NewReader(c).WriteTo(w)
}
