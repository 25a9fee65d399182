package quorum

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
)

// FuzzReadFrame: decoding untrusted frames never panics or allocates past
// the frame bound, and what decodes encodes back to a frame that decodes
// the same.
func FuzzReadFrame(f *testing.F) {
	frame := func(s string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
	}
	f.Add(frame(`{"v":1,"m":"apply","body":{"Version":1}}`))
	f.Add(frame(`{"v":1,"m":"status"}`))
	f.Add(frame(`{"code":"not_leader","msg":"x"}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req rpcRequest
		err := readFrame(bytes.NewReader(b), &req)
		if len(b) >= 4 && binary.BigEndian.Uint32(b) > internode.MaxFrameBytes && !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("oversized frame: %v", err)
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := writeFrame(&buf, req); err != nil {
			t.Fatal(err)
		}
		var again rpcRequest
		if err := readFrame(&buf, &again); err != nil {
			t.Fatal(err)
		}
		if again.Version != req.Version || again.Method != req.Method || again.Hops != req.Hops {
			t.Fatalf("round trip %+v -> %+v", req, again)
		}
	})
}

func TestReadFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short header", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"too large", []byte{0x7f, 0, 0, 0}, ErrFrameTooLarge},
		{"short body", []byte{0, 0, 0, 9, '{'}, io.ErrUnexpectedEOF},
		{"not json", []byte{0, 0, 0, 1, 'x'}, ErrRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v rpcRequest
			if err := readFrame(bytes.NewReader(tc.in), &v); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// Errors cross the wire as codes: the sentinel survives, and only a plain
// ErrNotLeader (nothing proposed) comes back as ErrNotLeader itself.
func TestErrorCodesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err       error
		sentinel  error
		exactNotL bool
	}{
		{raftfsm.ErrNotLeader, raftfsm.ErrNotLeader, true},
		{fmt.Errorf("%w (leadership lost)", raftfsm.ErrNotLeader), raftfsm.ErrNotLeader, false},
		{fmt.Errorf("%w: %q", raftfsm.ErrTopicExists, "a"), raftfsm.ErrTopicExists, false},
		{fmt.Errorf("x: %w", raftfsm.ErrStaleEpoch), raftfsm.ErrStaleEpoch, false},
		{fmt.Errorf("apply: %w", context.DeadlineExceeded), context.DeadlineExceeded, false},
		{errors.New("boom"), ErrRPC, false},
	} {
		got := decodeError(encodeError(tc.err))
		if !errors.Is(got, tc.sentinel) || (got == raftfsm.ErrNotLeader) != tc.exactNotL {
			t.Errorf("%v came back as %v", tc.err, got)
		}
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, v := range []any{&raftfsm.Topic{Name: "a"}, &raftfsm.Broker{ID: 3}, &raftfsm.Partition{Leader: 2}, int64(7), "id", nil} {
		wr, err := encodeResult(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wr.value()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%v came back as %v (%v)", v, got, err)
		}
	}
	if _, err := encodeResult(3.5); !errors.Is(err, ErrRPC) {
		t.Errorf("float result: %v", err)
	}
}
