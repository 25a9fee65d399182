package broker

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
)

// A partition's log lives in <data-dir>/partitions/<topic>-<index>, and
// that directory records the id of its topic, so a directory left by an
// older topic of the same name (deleted while this node was down, or whose
// deletion failed) is detected at open and replaced rather than served as
// the new topic's data.
//
// The id is an extended attribute of the directory (topicIDXattr, the 16
// bytes of the id): setting it allocates no inode and adds no directory
// entry, and on ext4, XFS or btrfs so small a value lives in the inode
// itself (no data block). Creating a partition is then two inodes, its
// directory and its first segment, where it was three (issue 19: at
// 300,000 partitions RF 3 the first writes spent most of a node's CPU
// creating logs, and on ext4 an inode allocation costs more the more inodes
// were freed lately, as every benchmark's cleanup frees them). The other
// places considered: the directory's name (<topic>-<index> plus 32 hex
// digits passes NAME_MAX, 255 bytes, for topic names over about 210 of the
// 249 characters allowed, and would rename every directory of a data dir
// on upgrade), or a file the log writes anyway (the segment's name is its
// base offset, and the log's state file, segments' format, is first
// written at the first fsync, not at creation). A filesystem without
// user extended attributes (errors.ErrUnsupported) gets the record of the
// previous release instead: an empty file named topicIDFilePrefix and the
// id in hex, which takes an inode but no data block. Older releases wrote
// the id in hex into partitionMetaFile, a 4 KB block each; both are still
// read, and replaced by the attribute at the log's first open after an
// upgrade.
//
// Nothing of the record is fsynced at creation (creating thousands of
// partitions must stay cheap): the log's first fsync, of its directory,
// makes the attribute durable with it, and a directory that lost its record
// in a crash records none, is taken as this topic's (what it was) and gets
// the record again at its next open.
const (
	topicIDXattr      = "user.runnel.topic-id"
	topicIDFilePrefix = "topic-id-"
	partitionMetaFile = "partition.metadata"
)

// xattrFS reads and sets extended attributes of files (the OS's:
// osXattrs; a fake in tests). Both report errors.ErrUnsupported where the
// filesystem has none.
type xattrFS interface {
	Getxattr(path, attr string, dest []byte) (int, error)
	Setxattr(path, attr string, value []byte) error
}

func partitionDirName(topic string, idx int32) string { return fmt.Sprintf("%s-%d", topic, idx) }

// errUnsafePartitionDir: a partition directory would not be a direct child
// of the partitions directory.
var errUnsafePartitionDir = errors.New("partition directory outside the data dir")

// partitionDir is where a partition's log lives, always a direct child of
// b.dir. Topic names come from the metadata log, which the FSM checks
// (raftfsm.ValidateTopicName); this checks again before a path is made from
// one, so nothing in the log can make the broker create or delete files
// elsewhere.
func (b *Broker) partitionDir(topic string, idx int32) (string, error) {
	name := partitionDirName(topic, idx)
	if raftfsm.ValidateTopicName(topic) != nil || idx < 0 || !filepath.IsLocal(name) || filepath.Base(name) != name {
		return "", fmt.Errorf("%w: topic %q partition %d", errUnsafePartitionDir, topic, idx)
	}
	return filepath.Join(b.dir, name), nil
}

// openLog opens a partition's log, creating it when its directory does not
// exist. A directory recording another topic id is an older topic's of the
// same name: it is replaced. onFail is called each time the log fails
// (segments.Options.OnFail; nil: none).
func (b *Broker) openLog(topic string, topicID [16]byte, idx int32, cfg segments.Config, onFail func()) (*segments.Log, error) {
	dir, err := b.partitionDir(topic, idx)
	if err != nil {
		return nil, err
	}
	opts := b.logOpts
	opts.OnFail = onFail
	// A new partition's directory does not exist: Create makes it with a
	// few calls and no listing (thousands of partitions created at once).
	log, err := segments.Create(dir, cfg, opts)
	switch {
	case err == nil:
		if _, err := b.recordTopicID(dir, topicID); err != nil {
			log.Close()
			return nil, fmt.Errorf("create partition %d: %w", idx, err)
		}
		return log, nil
	case !errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("create partition %d: %w", idx, err)
	}
	rec := b.dirTopicID(dir)
	if rec.kind != recordNone && rec.id != hex.EncodeToString(topicID[:]) {
		b.logger.Info("removing data of an older topic with the same name", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove stale %s: %w", dir, err)
		}
		rec = idRecord{}
	}
	log, err = segments.Open(dir, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("open partition %d: %w", idx, err)
	}
	if rec.kind == recordXattr {
		return log, nil
	}
	inXattr, err := b.recordTopicID(dir, topicID)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("open partition %d: %w", idx, err)
	}
	if inXattr {
		// An older release's record, replaced: not removed durably (one
		// found again beside the attribute is ignored, and removed again).
		_ = os.Remove(filepath.Join(dir, topicIDFilePrefix+rec.id))
		_ = os.Remove(filepath.Join(dir, partitionMetaFile))
	}
	return log, nil
}

// recordTopicID records id in dir: in its extended attribute, or where the
// filesystem has none in an empty file named after it. It reports whether
// the attribute holds it.
func (b *Broker) recordTopicID(dir string, id [16]byte) (inXattr bool, err error) {
	err = b.xattrs.Setxattr(dir, topicIDXattr, id[:])
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, errors.ErrUnsupported) {
		return false, fmt.Errorf("record the topic id of %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, topicIDFilePrefix+hex.EncodeToString(id[:])), os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return false, fmt.Errorf("record the topic id of %s: %w", dir, err)
	}
	return false, nil
}

// idRecord is the topic id a partition directory records, and where.
type idRecord struct {
	kind idRecordKind
	id   string // hex
}

type idRecordKind int

const (
	recordNone  idRecordKind = iota // none found (or no directory)
	recordXattr                     // topicIDXattr
	recordFile                      // a topicIDFilePrefix file (the previous release, or no attributes) or partitionMetaFile (older ones)
)

// dirTopicID returns the topic id dir records. An attribute of another
// size than an id's is no record of ours: it is replaced.
func (b *Broker) dirTopicID(dir string) idRecord {
	var id [17]byte
	n, err := b.xattrs.Getxattr(dir, topicIDXattr, id[:])
	if err == nil && n == 16 {
		return idRecord{kind: recordXattr, id: hex.EncodeToString(id[:16])}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return idRecord{}
	}
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), topicIDFilePrefix); ok {
			return idRecord{kind: recordFile, id: id}
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, partitionMetaFile)); err == nil {
		return idRecord{kind: recordFile, id: string(bytes.TrimSpace(raw))}
	}
	return idRecord{}
}
