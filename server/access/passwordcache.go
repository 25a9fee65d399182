package access

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// passwordCache remembers the passwords CheckPassword verified, so that a
// client sending HTTP Basic credentials with every request (or a SASL
// PLAIN client reconnecting) pays the SCRAM key derivation once, not per
// request: 4096 HMAC rounds are ~5 ms of CPU, and made single-record HTTP
// produces with Basic 10x slower than without authentication.
//
// An entry is keyed by an HMAC-SHA-256 of the user name and password under
// a random key drawn when the node starts, so the cache holds no password
// and nothing that means anything to another process; it holds the stored
// key the password was verified against, so a changed password or a
// deleted user no longer matches (the caller passes the current one).
// Only successes are remembered: a wrong password always costs the full
// derivation, as before. At most passwordCacheSize entries; past that an
// arbitrary one is dropped (it costs one derivation to come back).
type passwordCache struct {
	once sync.Once
	key  [32]byte
	mu   sync.Mutex
	m    map[[sha256.Size]byte]passwordEntry
}

type passwordEntry struct {
	user      string
	storedKey []byte
}

const passwordCacheSize = 10_000

func (c *passwordCache) mac(user, password string) [sha256.Size]byte {
	c.once.Do(func() {
		if _, err := rand.Read(c.key[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		c.m = map[[sha256.Size]byte]passwordEntry{}
	})
	h := hmac.New(sha256.New, c.key[:])
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(user)))) // the length keeps ("ab","c") apart from ("a","bc")
	h.Write([]byte(user))
	h.Write([]byte(password))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// verified reports whether user's password was verified against
// storedKey, the user's current stored key.
func (c *passwordCache) verified(user, password string, storedKey []byte) bool {
	if len(storedKey) == 0 {
		return false
	}
	k := c.mac(user, password)
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	return ok && e.user == user && hmac.Equal(e.storedKey, storedKey)
}

// remember records that password is user's, verified against storedKey.
func (c *passwordCache) remember(user, password string, storedKey []byte) {
	k := c.mac(user, password)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= passwordCacheSize {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = passwordEntry{user: user, storedKey: storedKey}
}
