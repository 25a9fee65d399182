package broker

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// noXattrs is a filesystem without extended attributes.
type noXattrs struct{}

func (noXattrs) Getxattr(string, string, []byte) (int, error) { return 0, unix.EOPNOTSUPP }
func (noXattrs) Setxattr(string, string, []byte) error        { return unix.EOPNOTSUPP }

// needXattrs skips the test where dir's filesystem has no user extended
// attributes (the broker records the topic id in a file there, which
// TestPartitionDirWithoutXattrs covers).
func needXattrs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Setxattr(dir, "user.runnel.probe", []byte{1}, 0); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("no user extended attributes on %s: %v", dir, err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, e := range mustReadDir(t, dir) {
		names = append(names, e.Name())
	}
	return names
}

// TestNewPartitionDirHoldsItsSegmentOnly (issue 19): creating a partition
// makes its directory and its first segment, nothing more: the topic id is
// an attribute of the directory, not a file of its own (an inode and a
// directory entry more per partition, on every replica).
func TestNewPartitionDirHoldsItsSegmentOnly(t *testing.T) {
	dir := t.TempDir()
	needXattrs(t, dir)
	b := lazyTestBroker(t, dir)
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("fresh", 4, 2, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup("fresh", 1); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "partitions", "fresh-1")
	if names := dirNames(t, pdir); !slices.Equal(names, []string{"00000000000000000000.log"}) {
		t.Fatalf("a new partition's directory holds %v, want its segment alone", names)
	}
	if rec := b.dirTopicID(pdir); rec.kind != recordXattr || rec.id != "04000000000000000000000000000000" {
		t.Fatalf("recorded topic id: %+v, want 04000000000000000000000000000000 in the attribute", rec)
	}
}

// TestPartitionDirUpgrade: a data dir written by older releases, whose
// partition directories record the topic id in an empty topic-id- file or
// in partition.metadata, opens with its records; the record moves to the
// directory's attribute (the old files are removed), and it opens again
// after that.
func TestPartitionDirUpgrade(t *testing.T) {
	dir := t.TempDir()
	needXattrs(t, dir)
	topic := lazyTopic("old", 9, 2, map[string]string{})
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(topic)}
	const id = "09000000000000000000000000000000"
	b := lazyTestBroker(t, dir)
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, err := b.Partition("old", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The releases before: each partition's record is a file, and its
	// directory has no attribute.
	legacy := map[int]string{0: topicIDFilePrefix + id, 1: partitionMetaFile}
	for i, name := range legacy {
		pdir := filepath.Join(dir, "partitions", partitionDirName("old", int32(i)))
		if err := unix.Removexattr(pdir, topicIDXattr); err != nil {
			t.Fatal(err)
		}
		data := ""
		if name == partitionMetaFile {
			data = id + "\n"
		}
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 { // upgraded, then reopened
		b = lazyTestBroker(t, dir)
		if err := b.Reconcile(img); err != nil {
			t.Fatal(err)
		}
		for i, name := range legacy {
			p, err := b.Lookup("old", int32(i))
			if err != nil {
				t.Fatal(err)
			}
			if _, end, _, err := p.Offsets(); err != nil || end != 1 {
				t.Fatalf("round %d, old-%d (%s): end %d, %v; want its record kept", round, i, name, end, err)
			}
			pdir := filepath.Join(dir, "partitions", partitionDirName("old", int32(i)))
			if rec := b.dirTopicID(pdir); rec.kind != recordXattr || rec.id != id {
				t.Fatalf("round %d, old-%d (%s): record %+v, want the id in the attribute", round, i, name, rec)
			}
			if _, err := os.Stat(filepath.Join(pdir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("round %d, old-%d: the previous record %s is still there: %v", round, i, name, err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartitionDirWithoutXattrs: where the filesystem has no extended
// attributes, a partition records its topic id in a topic-id- file, which
// identifies a stale directory of an older topic of the same name as
// before.
func TestPartitionDirWithoutXattrs(t *testing.T) {
	dir := t.TempDir()
	for round, id := range []byte{5, 6} { // topic "same" created, then deleted and created again
		b := lazyTestBroker(t, dir)
		b.xattrs = noXattrs{}
		if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("same", id, 1, map[string]string{}))}); err != nil {
			t.Fatal(err)
		}
		p, err := b.Partition("same", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, end, _, _ := p.Offsets(); end != 0 {
			t.Fatalf("round %d: topic %d opened with %d records of an older topic", round, id, end)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		idFile := filepath.Join(dir, "partitions", "same-0", topicIDFilePrefix+hex.EncodeToString([]byte{id})+"000000000000000000000000000000")
		if _, err := os.Stat(idFile); err != nil {
			t.Fatalf("round %d: no topic-id file: %v", round, err)
		}
	}
}
