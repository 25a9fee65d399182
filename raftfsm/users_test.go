package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func scramCmd(name, mech string, keyLen int) Command {
	return Command{UpsertUserScram: &UpsertUserScram{Name: name, Mechanism: mech, Credential: ScramCredential{
		Salt: []byte("salt"), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{1}, keyLen), ServerKey: bytes.Repeat([]byte{2}, keyLen),
	}}}
}

// Users are created, get a second mechanism, survive a reopen and a
// snapshot, and are deleted; bad commands are refused before they apply.
func TestFSMUsers(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	before, _ := f.Image()
	emptyDigest := before.Digest()
	for i, c := range []Command{scramCmd("alice", "SCRAM-SHA-256", 32), scramCmd("alice", "SCRAM-SHA-512", 64), scramCmd("bob", "SCRAM-SHA-512", 64)} {
		if res := applyAt(t, f, uint64(i+1), c); res != nil {
			t.Fatalf("apply %d: %v", i, res)
		}
	}
	img, _ := f.Image()
	if a := img.Users["alice"]; a == nil || len(a.Scram) != 2 || len(a.Scram["SCRAM-SHA-512"].StoredKey) != 64 {
		t.Fatalf("alice: %+v", img.Users["alice"])
	}
	if img.Digest() == emptyDigest {
		t.Fatal("users do not change the digest")
	}
	data := snapshotBytes(t, f)
	if res := applyAt(t, f, 4, Command{DeleteUser: &DeleteUser{Name: "bob"}}); res != nil {
		t.Fatalf("delete: %v", res)
	}
	if res := applyAt(t, f, 5, Command{DeleteUser: &DeleteUser{Name: "bob"}}); !errors.Is(res.(error), ErrUnknownUser) {
		t.Fatalf("delete again: %v", res)
	}
	for _, bad := range []Command{
		scramCmd("", "SCRAM-SHA-256", 32),
		scramCmd("a,b", "SCRAM-SHA-256", 32),
		scramCmd("carol", "SCRAM-SHA-1", 20),
		scramCmd("carol", "SCRAM-SHA-256", 64),
	} {
		cmd := bad
		cmd.Version = CommandVersion
		enc, _ := EncodeCommand(cmd)
		if _, err := DecodeCommand(enc); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("%+v: %v", cmd.UpsertUserScram, err)
		}
	}

	dst := newTestFSM(t, t.TempDir())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got, _ := dst.Image(); got.Digest() != img.Digest() || got.Users["bob"] == nil {
		t.Fatalf("restored users %+v", got.Users)
	}
	db := f.db
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re := newTestFSM(t, dir)
	if got, _ := re.Image(); got.Users["bob"] != nil || got.Users["alice"] == nil {
		t.Fatalf("reopened users %+v", got.Users)
	}
}

// ACLs are created (idempotently), survive a snapshot and are deleted.
func TestFSMACLs(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	a := ACLEntry{"topic", "orders", "literal", "User:alice", "*", "write", "allow"}
	b := ACLEntry{"group", "g", "prefixed", "User:*", "*", "read", "deny"}
	for i, c := range []Command{{CreateACLs: &CreateACLs{ACLs: []ACLEntry{a, b}}}, {CreateACLs: &CreateACLs{ACLs: []ACLEntry{a}}}} {
		if res := applyAt(t, f, uint64(i+1), c); res != nil {
			t.Fatalf("apply %d: %v", i, res)
		}
	}
	img, _ := f.Image()
	if len(img.ACLs) != 2 || img.ACLs[a.Key()] != a {
		t.Fatalf("acls %+v", img.ACLs)
	}
	data := snapshotBytes(t, f)
	applyAt(t, f, 3, Command{DeleteACLs: &DeleteACLs{ACLs: []ACLEntry{a}}})
	if img, _ := f.Image(); len(img.ACLs) != 1 {
		t.Fatalf("after delete %+v", img.ACLs)
	}
	dst := newTestFSM(t, t.TempDir())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got, _ := dst.Image(); len(got.ACLs) != 2 {
		t.Fatalf("restored %+v", got.ACLs)
	}
	bad := Command{Version: CommandVersion, CreateACLs: &CreateACLs{ACLs: []ACLEntry{{ResourceType: "topic"}}}}
	enc, _ := EncodeCommand(bad)
	if _, err := DecodeCommand(enc); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("empty fields: %v", err)
	}
}

// Tokens are stored (a hash, not the token), reloaded and deleted.
func TestFSMTokens(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	tok := Token{ID: "t1", Principal: "User:alice", Hash: [32]byte{1}, CreatedMs: 1, ExpiresMs: 2}
	if res := applyAt(t, f, 1, Command{CreateToken: &CreateToken{Token: tok}}); res != nil {
		t.Fatal(res)
	}
	if res := applyAt(t, f, 2, Command{DeleteToken: &DeleteToken{ID: "nope"}}); !errors.Is(res.(error), ErrUnknownToken) {
		t.Fatal(res)
	}
	f.db.Close()
	re := newTestFSM(t, dir)
	if img, _ := re.Image(); img.Tokens["t1"] == nil || *img.Tokens["t1"] != tok {
		t.Fatalf("reopened tokens %+v", img.Tokens)
	}
	if res := applyAt(t, re, 3, Command{DeleteToken: &DeleteToken{ID: "t1"}}); res != nil {
		t.Fatal(res)
	}
	bad := Command{Version: CommandVersion, CreateToken: &CreateToken{Token: Token{ID: "x", CreatedMs: 5, ExpiresMs: 5}}}
	enc, _ := EncodeCommand(bad)
	if _, err := DecodeCommand(enc); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("expiry not after creation: %v", err)
	}
}
