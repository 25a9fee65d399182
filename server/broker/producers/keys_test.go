package producers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

func testKey(key, body string) Key {
	return NewKey("", key, sha256.Sum256([]byte(body)))
}

// Keys expire after the window and an index never holds more than
// MaxKeys; a key's other body is refused.
func TestIdempotencyKeyIndexBounded(t *testing.T) {
	policy := &KeyPolicy{Expiration: time.Hour, MaxKeys: 100}
	x := NewKeyIndex(policy)
	now := time.Now()
	var keys []Key
	for i := range 10_000 {
		k := testKey(fmt.Sprint(i), "b")
		keys = append(keys, k)
		x.Record(k, int64(i), 1, now.UnixMilli()+int64(i), now)
		if x.Len() > policy.MaxKeys {
			t.Fatalf("%d keys held, max %d", x.Len(), policy.MaxKeys)
		}
	}
	if _, ok := x.lookup(keys[9_999].ID, now); !ok {
		t.Fatal("the newest key was dropped")
	}
	if _, ok := x.lookup(keys[0].ID, now); ok {
		t.Fatal("the oldest key was kept")
	}
	if _, _, _, err := x.Check(testKey("9999", "other"), 1, now); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("another body under a held key: %v", err)
	}
	if base, last, dup, err := x.Check(keys[9_999], 1, now); !dup || err != nil || base != 9_999 || last != 9_999 {
		t.Fatalf("retry: %d-%d %v %v", base, last, dup, err)
	}
	if _, ok := x.lookup(keys[9_999].ID, now.Add(2*time.Hour)); ok {
		t.Fatal("a key outlived the expiration")
	}
}

// The fields a key puts into a batch read back as the same key, keys
// forwarded between nodes survive their text form, and key ids stay in
// their range.
func TestIdempotencyKeyRoundTrip(t *testing.T) {
	for i := range 1000 {
		k := testKey(fmt.Sprint("k", i), fmt.Sprint("body", i))
		if !IsKeyID(k.ID) {
			t.Fatalf("key id %d outside the key range", k.ID)
		}
		if got, ok := KeyOf(k.ID, k.Epoch(), k.Seq(), false); !ok || got != k {
			t.Fatalf("key %+v read back as %+v %v", k, got, ok)
		}
		if _, ok := KeyOf(k.ID, k.Epoch(), k.Seq(), true); ok {
			t.Fatal("a control batch read as a key")
		}
		if f := ForwardedKey(WithForwardedKey(context.Background(), k.String())); f == nil || *f != k {
			t.Fatalf("forwarded %q read back as %v", k.String(), f)
		}
	}
	for _, bad := range []string{"", "1.2", "x.y", fmt.Sprintf("%d.%d", KeyIDBase, uint64(1)<<45)} {
		if ForwardedKey(WithForwardedKey(context.Background(), bad)) != nil {
			t.Fatalf("forwarded %q taken as a key", bad)
		}
	}
	if !IsKeyID(KeyIDBase) || IsKeyID(KeyIDBase-1) || IsKeyID(-1) {
		t.Fatal("key range bounds")
	}
}

// The memory one remembered key costs (reported; asserted loosely, so the
// README's figure stays true).
func TestIdempotencyKeyMemory(t *testing.T) {
	const keys = 100_000
	ids := make([]Key, keys)
	for i := range ids {
		ids[i] = testKey(fmt.Sprint(i), "b")
	}
	used, keep := heapAfter(func() any {
		x := NewKeyIndex(&KeyPolicy{Expiration: time.Hour, MaxKeys: keys + 1})
		now := time.Now()
		for i, k := range ids {
			x.Record(k, int64(i), 1, now.UnixMilli(), now)
		}
		return x
	})
	runtime.KeepAlive(keep)
	per := used / keys
	t.Logf("%d keys: %d KiB, %d bytes per key", keys, used>>10, per)
	if per > 200 {
		t.Fatalf("%d bytes per key", per)
	}
}

// Equal tells key indexes apart by what Check answers, and ignores keys
// that expired.
func TestIdempotencyKeyIndexEqual(t *testing.T) {
	policy := &KeyPolicy{Expiration: time.Hour, MaxKeys: 10}
	now := time.Now()
	k := NewKey("", "k", sha256.Sum256([]byte("body")))
	base := func() *KeyIndex {
		x := NewKeyIndex(policy)
		x.Record(k, 4, 2, now.UnixMilli(), now)
		return x
	}
	if !base().Equal(base(), now) {
		t.Fatal("equal indexes differ")
	}
	old := base()
	old.Record(NewKey("", "old", sha256.Sum256(nil)), 0, 1, now.Add(-2*time.Hour).UnixMilli(), now)
	if !old.Equal(base(), now) {
		t.Fatal("an expired key makes indexes differ")
	}
	moved := base()
	moved.Record(k, 5, 2, now.UnixMilli(), now)
	other := base()
	other.Record(NewKey("", "other", sha256.Sum256(nil)), 6, 1, now.UnixMilli(), now)
	if moved.Equal(base(), now) || other.Equal(base(), now) || base().Equal(other, now) {
		t.Fatal("different indexes are equal")
	}
}
