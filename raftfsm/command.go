package raftfsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Command encodings and versions.
//
// A raft log entry holds one command in one of two envelopes, told apart
// by the first byte:
//
//	'{'   JSON of Command, its Version field set (versions 1 and up)
//	0x00  binary: 0x00 | version u8 | kind u8 | body (version 2 and up)
//
// Binary kinds (integers are varints, zigzag for signed ones; a list of
// int32 is uvarint(n+1) then n varints, 0 meaning a nil list):
//
//	1  ChangePartitionsBatch: uvarint topics, then per topic uvarint
//	   len(name) | name | uvarint changes, then per change varint
//	   partition | varint leader epoch | varint partition epoch |
//	   varint leader | ISR list
//
// The rules that make rolling upgrades safe:
//
//   - A command's Version is the lowest that expresses it (MinVersion):
//     what older nodes apply is still written as they wrote it, so their
//     stored state and digests do not change.
//   - A proposer writes a command of a version above the cluster's
//     (Image.CommandVersion) never: the active controller raises the
//     cluster's version (SetCommandVersion) only once every node of the
//     raft configuration reports it applies it (Status.CommandVersion).
//   - A node that decodes a command of a newer version than it applies, a
//     JSON field it does not know, or a binary kind it does not know, gets
//     ErrUnsupportedCommand, and the FSM stops the node on it (a panic
//     naming the index and both versions) instead of skipping it or
//     dropping the part it does not know: either would leave it with
//     metadata that differs from its peers', silently. Upgrading its
//     binary and restarting it resumes at that command.
//   - A new command field or kind, or a new meaning of an old one, needs
//     a new version: MinVersion must report it, so that it is written only
//     once every node understands it.
const (
	binaryEnvelope = 0x00

	kindChangePartitionsBatch = 1
)

// EncodeCommand is the raft log encoding of a command: the binary envelope
// for ChangePartitionsBatch, JSON for the others. A zero Version is set to
// the command's MinVersion.
func EncodeCommand(c Command) ([]byte, error) {
	if c.Version == 0 {
		c.Version = c.MinVersion()
	}
	if c.ChangePartitionsBatch != nil && c.count() == 1 {
		if c.Version < 2 {
			return nil, fmt.Errorf("%w: ChangePartitionsBatch needs version 2, not %d", ErrInvalidCommand, c.Version)
		}
		return encodeBatch(c.Version, c.ChangePartitionsBatch), nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: encode command: %w", err)
	}
	return b, nil
}

// MinVersion is the lowest command version that expresses c.
func (c *Command) MinVersion() uint8 {
	if c.SetCommandVersion != nil || c.ChangePartitionsBatch != nil {
		return 2
	}
	return 1
}

// DecodeCommand decodes a command from raft log bytes and checks the
// envelope (a version this node applies, exactly one command set) and the
// command against the hard bounds (checkCommand): the FSM applies nothing
// else. ErrUnsupportedCommand: written by a newer version (see above);
// ErrInvalidCommand: malformed or out of bounds.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if len(b) > 0 && b[0] == binaryEnvelope {
		var err error
		if c, err = decodeBinary(b); err != nil {
			return Command{}, err
		}
	} else if err := decodeJSON(b, &c); err != nil {
		return Command{}, err
	}
	if err := c.Check(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// decodeJSON decodes a JSON envelope, refusing fields it does not know: a
// newer node wrote them, and dropping them would apply another command.
func decodeJSON(b []byte, c *Command) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		// A newer version is reported as such whatever else in it fails
		// to decode (a version 3 may change a field's type).
		var v struct{ Version int }
		if json.Unmarshal(b, &v) == nil && v.Version > CommandVersion {
			return unsupported(v.Version)
		}
		if strings.HasPrefix(err.Error(), "json: unknown field") {
			return unsupportedError(fmt.Sprintf("version %d with %v", c.Version, err))
		}
		return fmt.Errorf("%w: decode: %v", ErrInvalidCommand, err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("%w: decode: %d bytes after the command", ErrInvalidCommand, len(rest))
	}
	return nil
}

func unsupported(version int) error {
	return unsupportedError(fmt.Sprintf("version %d, this node applies versions %d to %d", version, MinCommandVersion, CommandVersion))
}

// unsupportedError is ErrUnsupportedCommand, and ErrInvalidCommand for a
// proposer (and the error tables), which refuse it as any bad command.
type unsupportedError string

func (e unsupportedError) Error() string { return ErrUnsupportedCommand.Error() + ": " + string(e) }

func (e unsupportedError) Is(target error) bool {
	return target == ErrUnsupportedCommand || target == ErrInvalidCommand
}

// UnmarshalCommand decodes a command's JSON as DecodeCommand does (a field
// it does not know is ErrUnsupportedCommand, not dropped), without
// checking it: for a command forwarded to the active controller, which
// fills in and checks it before proposing.
func UnmarshalCommand(b []byte) (Command, error) {
	var c Command
	err := decodeJSON(b, &c)
	return c, err
}

// Check checks the envelope and the command against the hard bounds: what
// the FSM checks again at apply, so a proposer can refuse early.
func (c *Command) Check() error {
	if int(c.Version) > CommandVersion {
		return unsupported(int(c.Version))
	}
	if c.Version < MinCommandVersion {
		return fmt.Errorf("%w: version %d, want %d to %d", ErrInvalidCommand, c.Version, MinCommandVersion, CommandVersion)
	}
	if n := c.count(); n != 1 {
		return fmt.Errorf("%w: %d commands in one envelope, want 1", ErrInvalidCommand, n)
	}
	if min := c.MinVersion(); c.Version < min {
		return fmt.Errorf("%w: version %d for a command of version %d", ErrInvalidCommand, c.Version, min)
	}
	return checkCommand(c)
}

func (c *Command) count() int {
	n := 0
	for _, set := range []bool{
		c.CreateTopic != nil, c.DeleteTopic != nil, c.AlterConfigs != nil,
		c.CreatePartitions != nil, c.RegisterBroker != nil, c.SetBrokerState != nil,
		c.ChangePartition != nil, c.AllocateProducerIDs != nil, c.InitCluster != nil,
		c.ChangePartitions != nil, c.ReassignPartition != nil,
		c.UpsertUserScram != nil, c.DeleteUser != nil, c.CreateACLs != nil, c.DeleteACLs != nil,
		c.CreateToken != nil, c.DeleteToken != nil, c.SetQuotas != nil,
		c.SetCommandVersion != nil, c.ChangePartitionsBatch != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

// encodeBatch is the binary envelope of a ChangePartitionsBatch.
func encodeBatch(version uint8, cb *ChangePartitionsBatch) []byte {
	n := 16
	for _, t := range cb.Topics {
		n += 8 + len(t.Topic) + len(t.Changes)*12
	}
	b := append(make([]byte, 0, n), binaryEnvelope, version, kindChangePartitionsBatch)
	b = binary.AppendUvarint(b, uint64(len(cb.Topics)))
	for _, t := range cb.Topics {
		b = binary.AppendUvarint(b, uint64(len(t.Topic)))
		b = append(b, t.Topic...)
		b = binary.AppendUvarint(b, uint64(len(t.Changes)))
		for i := range t.Changes {
			ch := &t.Changes[i]
			b = binary.AppendVarint(b, int64(ch.Partition))
			b = binary.AppendVarint(b, int64(ch.LeaderEpoch))
			b = binary.AppendVarint(b, int64(ch.PartitionEpoch))
			b = binary.AppendVarint(b, int64(ch.Leader))
			b = appendIDs(b, ch.ISR)
		}
	}
	return b
}

// appendIDs appends a list of int32: uvarint(n+1) (0: nil) and n varints.
func appendIDs(b []byte, ids []int32) []byte {
	if ids == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(ids))+1)
	for _, id := range ids {
		b = appendVarint32(b, id)
	}
	return b
}

// appendVarint32 is binary.AppendVarint(b, int64(v)), the same bytes (an
// int32's zigzag fits a uint32), with the one byte nearly every broker id
// and epoch takes written at once: encoding a changed topic's stored form
// was a third of applying a leader move (BenchmarkChangePartitions).
func appendVarint32(b []byte, v int32) []byte {
	u := uint32(v<<1) ^ uint32(v>>31)
	if u < 0x80 {
		return append(b, byte(u))
	}
	return binary.AppendUvarint(b, uint64(u))
}

// decodeBinary decodes a binary envelope.
func decodeBinary(b []byte) (Command, error) {
	if len(b) < 3 {
		return Command{}, fmt.Errorf("%w: short binary command", ErrInvalidCommand)
	}
	version, kind := b[1], b[2]
	if version > CommandVersion {
		return Command{}, unsupported(int(version))
	}
	if kind != kindChangePartitionsBatch {
		return Command{}, unsupportedError(fmt.Sprintf("version %d binary command of kind %d", version, kind))
	}
	r := &reader{b: b[3:]}
	cb := &ChangePartitionsBatch{}
	nt := r.count(2)
	cb.Topics = make([]ChangePartitions, 0, nt)
	// The ISRs share backing arrays (idsInto), which the FSM keeps in the
	// partitions it changes (setPartition): one allocation per few
	// thousand changes, not one per change, to make and for every later
	// garbage collection to scan.
	var ids []int32
	for range nt {
		var t ChangePartitions
		t.Topic = string(r.bytes(maxTopicNameLen))
		nc := r.count(5)
		t.Changes = make([]ChangePartition, nc)
		for i := range t.Changes {
			ch := &t.Changes[i]
			ch.Partition = r.int32()
			ch.LeaderEpoch = r.int32()
			ch.PartitionEpoch = r.int32()
			ch.Leader = r.int32()
			ch.ISR, ids = r.idsInto(ids)
			if len(ch.ISR) > HardMaxReplicationFactor {
				r.fail("an ISR of %d", len(ch.ISR))
			}
		}
		cb.Topics = append(cb.Topics, t)
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the command", len(r.b))
	}
	if r.err != nil {
		return Command{}, fmt.Errorf("%w: binary command: %v", ErrInvalidCommand, r.err)
	}
	return Command{Version: version, ChangePartitionsBatch: cb}, nil
}

// reader decodes varints from untrusted bytes; the first error sticks and
// every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, a...)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int32() int32 {
	v, n := binary.Varint(r.b)
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("bad int32")
		return 0
	}
	r.b = r.b[n:]
	return int32(v)
}

// count reads a count of elements that take at least minBytes each, so
// that it cannot exceed what the remaining bytes hold.
func (r *reader) count(minBytes int) int {
	v := r.uvarint()
	if v > uint64(len(r.b)/minBytes) {
		r.fail("count %d for %d bytes", v, len(r.b))
		return 0
	}
	return int(v)
}

func (r *reader) bytes(max int) []byte {
	n := r.uvarint()
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.fail("length %d", n)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
