package segments

import (
	"bytes"
	"net"
	"syscall"
	"testing"
)

// A chunk of a log on the OS filesystem goes to a TCP socket with
// sendfile itself, not the copy TestChunkWriteToSocket would also accept:
// the file a FileRange gives is a syscall.Conn sendfile handles.
func TestChunkSendfileHandled(t *testing.T) {
	l := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer l.Close()
	mustAppend(t, l, valueBatch(10, 100, 1), 0)
	want := readAll(t, l, 0, 1<<20)
	conn, got := socketSink(t)
	c, err := l.Read(0, 1<<20, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, off, n := c.(FileRange).FileRange()
	src, ok := f.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is no syscall.Conn: no sendfile", f)
	}
	written, handled, err := sendfile(conn.(*net.TCPConn), src, off, n)
	if !handled || err != nil || written != n {
		t.Fatalf("sendfile: %d of %d bytes, handled %v, %v", written, n, handled, err)
	}
	conn.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("socket got %d bytes, want %d", len(b), len(want))
	}
}
