package access

import (
	"fmt"
	"testing"
)

func TestPasswordCache(t *testing.T) {
	var c passwordCache
	key, other := []byte("stored-key-1"), []byte("stored-key-2")
	if c.verified("alice", "pw", key) {
		t.Fatal("verified before anything was remembered")
	}
	c.remember("alice", "pw", key)
	for _, tc := range []struct {
		user, pw string
		stored   []byte
		want     bool
	}{
		{"alice", "pw", key, true},
		{"alice", "pw", other, false}, // a new password: another stored key
		{"alice", "pw", nil, false},   // a deleted user
		{"alice", "pw2", key, false},
		{"alicep", "w", key, false}, // name and password are not just concatenated
		{"bob", "pw", key, false},
	} {
		if got := c.verified(tc.user, tc.pw, tc.stored); got != tc.want {
			t.Errorf("verified(%q, %q, %q) = %v", tc.user, tc.pw, tc.stored, got)
		}
	}
	for i := range passwordCacheSize + 10 {
		c.remember(fmt.Sprintf("u%d", i), "pw", key)
	}
	if n := len(c.m); n > passwordCacheSize {
		t.Fatalf("%d entries, at most %d", n, passwordCacheSize)
	}
}
