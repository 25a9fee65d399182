package segments

import (
	"errors"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// A side file written through the log survives a crash right after the
// call (file and directory fsynced), is replaced atomically, and names that
// could hit the log's own files are refused.
func TestSideFileSurvivesCrash(t *testing.T) {
	const dir = "/data/p0"
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, DefaultConfig(), Options{FS: mem})
	if err := l.WriteSideFile("high-watermark", []byte("1 2\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteSideFile("high-watermark", []byte("7 8\n")); err != nil {
		t.Fatal(err)
	}
	img := mem.Crash(nil)
	after := mustOpen(t, dir, DefaultConfig(), Options{FS: img})
	got, err := after.ReadSideFile("high-watermark")
	if err != nil || string(got) != "7 8\n" {
		t.Fatalf("after a crash: %q, %v", got, err)
	}
	if got, err := after.ReadSideFile("absent"); got != nil || err != nil {
		t.Fatalf("missing side file: %q, %v", got, err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".lock", "log.state", "leader-epoch-checkpoint", "00000000000000000000.log", "x.index", "x.tmp"} {
		if err := l.WriteSideFile(bad, []byte("x")); err == nil {
			t.Errorf("side file name %q accepted", bad)
		}
	}
}

// A failed directory fsync is reported: the checkpoint is not durable.
func TestSideFileReportsDirSyncFailure(t *testing.T) {
	const dir = "/data/p0"
	fail := false
	efs := vfs.NewErrorFS(vfs.NewMemFS(), func(op vfs.Op, path string) error {
		if fail && op == vfs.OpSyncDir {
			return errors.New("injected: directory fsync failed")
		}
		return nil
	})
	l := mustOpen(t, dir, DefaultConfig(), Options{FS: efs})
	fail = true
	if err := l.WriteSideFile("high-watermark", []byte("1 2\n")); err == nil {
		t.Fatal("a failed directory fsync was not reported")
	}
}
