package raftfsm

import (
	"errors"
	"fmt"
	"strings"
)

// Users: the SCRAM credentials of the cluster's users (Kafka's
// UserScramCredentialsRecord). Only what a SCRAM server needs is stored —
// salt, iterations, StoredKey and ServerKey — never a password: the node
// derives them before proposing (the derivation is random, the FSM is not).
// Result of both commands: nil.

// ErrUnknownUser: DeleteUser names no user.
var ErrUnknownUser = errors.New("raftfsm: unknown user")

// ScramMechanisms are the SCRAM mechanisms a credential may be stored for,
// with the length of their keys (the hash's output).
var ScramMechanisms = map[string]int{"SCRAM-SHA-256": 32, "SCRAM-SHA-512": 64}

// Bounds of a user command, checked before it is applied.
const (
	MaxUserNameLen     = 256
	maxSaltLen         = 64
	MinScramIterations = 4096 // RFC 7677's minimum and Kafka's
	MaxScramIterations = 16384
	prefixUsers        = "users/"
)

// User is one user and its credential per mechanism.
type User struct {
	Name  string
	Scram map[string]ScramCredential // key: mechanism, e.g. "SCRAM-SHA-256"
}

// ScramCredential is RFC 5802's stored form of a password.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// UpsertUserScram creates the user or replaces its credential for
// Mechanism (its credentials for other mechanisms stay).
type UpsertUserScram struct {
	Name       string
	Mechanism  string
	Credential ScramCredential
}

// DeleteUser removes the user and all its credentials; ErrUnknownUser when
// there is none.
type DeleteUser struct{ Name string }

func userKey(name string) string { return prefixUsers + name }

func checkUserName(name string) error {
	if name == "" || len(name) > MaxUserNameLen || strings.ContainsAny(name, ",=\x00") {
		return fmt.Errorf("%w: user name must be 1 to %d bytes without ',' '=' or NUL", ErrInvalidCommand, MaxUserNameLen)
	}
	return nil
}

func checkUpsertUser(u *UpsertUserScram) error {
	if err := checkUserName(u.Name); err != nil {
		return err
	}
	keyLen, ok := ScramMechanisms[u.Mechanism]
	if !ok {
		return fmt.Errorf("%w: unknown SCRAM mechanism %q", ErrInvalidCommand, u.Mechanism)
	}
	c := u.Credential
	if len(c.Salt) == 0 || len(c.Salt) > maxSaltLen {
		return fmt.Errorf("%w: salt of %d bytes (want 1 to %d)", ErrInvalidCommand, len(c.Salt), maxSaltLen)
	}
	if c.Iterations < MinScramIterations || c.Iterations > MaxScramIterations {
		return fmt.Errorf("%w: %d iterations (want %d to %d)", ErrInvalidCommand, c.Iterations, MinScramIterations, MaxScramIterations)
	}
	if len(c.StoredKey) != keyLen || len(c.ServerKey) != keyLen {
		return fmt.Errorf("%w: %s keys must be %d bytes", ErrInvalidCommand, u.Mechanism, keyLen)
	}
	return nil
}

func (c *change) upsertUserScram(cmd *UpsertUserScram) (any, error) {
	u := &User{Name: cmd.Name, Scram: map[string]ScramCredential{}}
	if old, ok := c.img.Users[cmd.Name]; ok {
		for m, cr := range old.Scram {
			u.Scram[m] = cr
		}
	}
	u.Scram[cmd.Mechanism] = cmd.Credential
	c.img.users()[u.Name] = u
	c.writes = append(c.writes, write{userKey(u.Name), mustJSON(u)})
	return nil, nil
}

func (c *change) deleteUser(cmd *DeleteUser) (any, error) {
	if _, ok := c.img.Users[cmd.Name]; !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownUser, cmd.Name)
	}
	delete(c.img.users(), cmd.Name)
	c.writes = append(c.writes, write{key: userKey(cmd.Name)})
	return nil, nil
}

// Credential returns the user's credential for mechanism; u may be nil.
func (u *User) Credential(mechanism string) (ScramCredential, bool) {
	if u == nil {
		return ScramCredential{}, false
	}
	c, ok := u.Scram[mechanism]
	return c, ok
}
