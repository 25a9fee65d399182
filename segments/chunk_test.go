package segments

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestChunkWriteToSocket sends a chunk through loopback TCP (the sendfile
// path) and through a plain writer, twice each from the same file, checking
// the explicit offsets are used (no shared seek position).
func TestChunkWriteToSocket(t *testing.T) {
	l := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer l.Close()
	for i := 0; i < 100; i++ {
		mustAppend(t, l, valueBatch(10, 100, int64(i)), 0)
	}
	want := readAll(t, l, 500, 1<<20)
	conn, got := socketSink(t)
	for i := 0; i < 2; i++ {
		c, err := l.Read(500, 1<<20, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.(FileRange); !ok {
			t.Fatal("chunk is not a FileRange")
		}
		if n, err := c.WriteTo(conn); err != nil || n != int64(len(want)) {
			t.Fatalf("WriteTo socket: %d %v", n, err)
		}
		var buf bytes.Buffer
		if _, err := c.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("WriteTo buffer: %v", err)
		}
		c.Close()
	}
	conn.Close()
	if b := <-got; !bytes.Equal(b, append(bytes.Clone(want), want...)) {
		t.Fatalf("socket got %d bytes, want %d", len(b), 2*len(want))
	}
}

// socketSink is a TCP connection to a local listener, and what the
// listener read from it until it was closed.
func socketSink(t *testing.T) (net.Conn, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return conn, got
}
