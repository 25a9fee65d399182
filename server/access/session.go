package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/runnel/runnel/api"
)

// UI sessions (issue 15; api/session.go): a login with a user's password or
// an API token opens a session held in this node's memory, named by a
// random cookie value (only its SHA-256 is kept) and carrying a random
// CSRF token. Sessions end on logout, after sessionLifetime, or when the
// node restarts (the UI asks to log in again). At most maxSessions are
// kept; the oldest goes first.

const (
	sessionLifetime = 12 * time.Hour
	maxSessions     = 10_000
)

type uiSession struct {
	principal, csrf string
	expires         time.Time
}

// sessionStore holds the sessions by the SHA-256 of their id.
type sessionStore struct {
	mu sync.Mutex
	m  map[[32]byte]*uiSession // guarded by mu
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func (st *sessionStore) open(principal string) (id string, sess *uiSession) {
	id = randomToken()
	sess = &uiSession{principal: principal, csrf: randomToken(), expires: time.Now().Add(sessionLifetime)}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		st.m = map[[32]byte]*uiSession{}
	}
	if len(st.m) >= maxSessions {
		st.evictLocked()
	}
	st.m[sha256.Sum256([]byte(id))] = sess
	return id, sess
}

// evictLocked drops the expired sessions, or the one closest to expiry.
func (st *sessionStore) evictLocked() {
	now := time.Now()
	var oldest [32]byte
	var oldestAt time.Time
	for k, s := range st.m {
		if s.expires.Before(now) {
			delete(st.m, k)
		} else if oldestAt.IsZero() || s.expires.Before(oldestAt) {
			oldest, oldestAt = k, s.expires
		}
	}
	if len(st.m) >= maxSessions {
		delete(st.m, oldest)
	}
}

func (st *sessionStore) get(id string) *uiSession {
	if id == "" {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[sha256.Sum256([]byte(id))]
	if s == nil || time.Now().After(s.expires) {
		return nil
	}
	return s
}

func (st *sessionStore) close(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.m, sha256.Sum256([]byte(id)))
}

// OpenSession opens a UI session of principal and returns its id (the
// cookie value) and CSRF token.
func (a *Access) OpenSession(principal string) (id, csrf string) {
	id, sess := a.sessions.open(principal)
	return id, sess.csrf
}

// Session returns the principal and CSRF token of a live session.
func (a *Access) Session(id string) (principal, csrf string, ok bool) {
	sess := a.sessions.get(id)
	if sess == nil {
		return "", "", false
	}
	return sess.principal, sess.csrf, true
}

// CloseSession ends a session (logout).
func (a *Access) CloseSession(id string) { a.sessions.close(id) }

// checkSession is CheckCredentials' "session" scheme.
func (a *Access) checkSession(c api.Credentials) (string, error) {
	sess := a.sessions.get(c.Token)
	if sess == nil {
		return "", fmt.Errorf("%w: the session ended; log in again", api.ErrUnauthenticated)
	}
	if c.Write && subtle.ConstantTimeCompare([]byte(c.CSRF), []byte(sess.csrf)) != 1 {
		return "", fmt.Errorf("%w: a change made with the session cookie needs the session's token in %s", api.ErrCSRF, api.CSRFHeader)
	}
	return sess.principal, nil
}
