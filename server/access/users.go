package access

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"

	"github.com/xdg-go/scram"

	"github.com/runnel/runnel/raftfsm"
)

// Users: SCRAM credentials in the metadata log (raftfsm.UpsertUserScram),
// the one store both doors authenticate against. A password lives only in
// the request that sets it: the node derives the credential here (random
// salt, so before proposing) and never logs either.

const (
	scramSaltLen    = 32
	scramIterations = raftfsm.MinScramIterations // Kafka's default
)

// ErrUnknownMechanism: not SCRAM-SHA-256 or SCRAM-SHA-512.
var ErrUnknownMechanism = errors.New("unknown SCRAM mechanism")

// ErrInvalidCredential: SASLprep refused a user name or password.
var ErrInvalidCredential = errors.New("invalid user name or password")

// scramHash is the xdg-go/scram hash of a mechanism.
func scramHash(mechanism string) (scram.HashGeneratorFcn, error) {
	switch mechanism {
	case "SCRAM-SHA-256":
		return scram.SHA256, nil
	case "SCRAM-SHA-512":
		return scram.SHA512, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, mechanism)
}

// deriveScram returns the stored form of password for mechanism with salt
// and iterations.
func deriveScram(mechanism, name, password string, salt []byte, iterations int) (raftfsm.ScramCredential, error) {
	hash, err := scramHash(mechanism)
	if err != nil {
		return raftfsm.ScramCredential{}, err
	}
	client, err := hash.NewClient(name, password, "")
	if err != nil { // SASLprep refused the name or the password
		return raftfsm.ScramCredential{}, fmt.Errorf("%w: %v", ErrInvalidCredential, err)
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return raftfsm.ScramCredential{}, fmt.Errorf("%w: %v", ErrInvalidCredential, err)
	}
	return raftfsm.ScramCredential{Salt: salt, Iterations: iterations, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// UpsertUser derives a fresh credential and proposes it.
func (a *Access) UpsertUser(ctx context.Context, name, password, mechanism string) error {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	cred, err := deriveScram(mechanism, name, password, salt, scramIterations)
	if err != nil {
		return err
	}
	return a.cfg.Meta.Apply(ctx, raftfsm.Command{UpsertUserScram: &raftfsm.UpsertUserScram{Name: name, Mechanism: mechanism, Credential: cred}})
}

// DeleteUser proposes deleting a user (raftfsm.ErrUnknownUser).
func (a *Access) DeleteUser(ctx context.Context, name string) error {
	return a.cfg.Meta.Apply(ctx, raftfsm.Command{DeleteUser: &raftfsm.DeleteUser{Name: name}})
}

// UserMechanisms lists a user's mechanisms, sorted.
func UserMechanisms(u *raftfsm.User) []string {
	ms := make([]string, 0, len(u.Scram))
	for m := range u.Scram {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// BootstrapSuperuser creates Config.BootstrapSuperuser on first start:
// when the metadata has no user of that name yet (an existing one keeps
// its password, so a restart never resets it).
func (a *Access) BootstrapSuperuser(ctx context.Context) error {
	name := a.cfg.BootstrapSuperuser
	if name == "" {
		return nil
	}
	if err := a.cfg.Meta.CatchUp(ctx); err != nil && !errors.Is(err, raftfsm.ErrNotLeader) {
		return fmt.Errorf("bootstrap superuser: %w", err) // without a controller, the creation below fails
	}
	if img := a.cfg.Meta.Image(); img.Users[name] != nil {
		return nil
	}
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if err := a.UpsertUser(ctx, name, a.cfg.BootstrapSuperuserPassword, m); err != nil {
			return fmt.Errorf("bootstrap superuser %q: %w", name, err)
		}
	}
	a.cfg.Logger.Info("bootstrap superuser created", "user", name)
	return nil
}

// CheckPassword reports whether password is user's: it derives the stored
// key from the password with the user's salt and iterations and compares
// in constant time (PLAIN, HTTP Basic). An unknown user costs the same
// derivation, so timing does not tell which users exist. A password
// verified before against the same stored key skips the derivation
// (passwordCache).
func (a *Access) CheckPassword(user, password string) bool {
	img := a.cfg.Meta.Image()
	u := img.Users[user]
	var mech string
	var want raftfsm.ScramCredential
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if c, ok := u.Credential(m); ok {
			mech, want = m, c
			break
		}
	}
	if mech == "" {
		mech, want = "SCRAM-SHA-256", raftfsm.ScramCredential{Salt: []byte("runnel-no-such-user"), Iterations: scramIterations}
	}
	if a.passwords.verified(user, password, want.StoredKey) {
		return true
	}
	got, err := deriveScram(mech, user, password, want.Salt, want.Iterations)
	if err != nil || len(want.StoredKey) == 0 {
		return false
	}
	if subtle.ConstantTimeCompare(got.StoredKey, want.StoredKey) != 1 {
		return false
	}
	a.passwords.remember(user, password, want.StoredKey)
	return true
}

// ScramCredential is user's stored credential for mechanism (SASL SCRAM).
func (a *Access) ScramCredential(mechanism, user string) (raftfsm.ScramCredential, bool) {
	return a.cfg.Meta.Image().Users[user].Credential(mechanism)
}
