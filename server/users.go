package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/xdg-go/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
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

var errUnknownMechanism = errors.New("unknown SCRAM mechanism")

// scramHash is the xdg-go/scram hash of a mechanism.
func scramHash(mechanism string) (scram.HashGeneratorFcn, error) {
	switch mechanism {
	case "SCRAM-SHA-256":
		return scram.SHA256, nil
	case "SCRAM-SHA-512":
		return scram.SHA512, nil
	}
	return nil, fmt.Errorf("%w: %q", errUnknownMechanism, mechanism)
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
		return raftfsm.ScramCredential{}, fmt.Errorf("%w: %v", errInvalidCredential, err)
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return raftfsm.ScramCredential{}, fmt.Errorf("%w: %v", errInvalidCredential, err)
	}
	return raftfsm.ScramCredential{Salt: salt, Iterations: iterations, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

var errInvalidCredential = errors.New("invalid user name or password")

// upsertUser derives a fresh credential and proposes it.
func (s *Server) upsertUser(ctx context.Context, name, password, mechanism string) error {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	cred, err := deriveScram(mechanism, name, password, salt, scramIterations)
	if err != nil {
		return err
	}
	_, err = s.applyMeta(ctx, raftfsm.Command{UpsertUserScram: &raftfsm.UpsertUserScram{Name: name, Mechanism: mechanism, Credential: cred}})
	return err
}

// userMechanisms lists a user's mechanisms, sorted.
func userMechanisms(u *raftfsm.User) []string {
	ms := make([]string, 0, len(u.Scram))
	for m := range u.Scram {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// bootstrapSuperuser creates --bootstrap-superuser on first start: when
// the metadata has no user of that name yet (an existing one keeps its
// password, so a restart never resets it).
func (s *Server) bootstrapSuperuser(ctx context.Context) error {
	a := s.cfg.Auth
	if a.BootstrapSuperuser == "" {
		return nil
	}
	if err := s.catchUpWithLeader(ctx); err != nil {
		return fmt.Errorf("bootstrap superuser: %w", err)
	}
	if img, _ := s.meta.Image(); img.Users[a.BootstrapSuperuser] != nil {
		return nil
	}
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if err := s.upsertUser(ctx, a.BootstrapSuperuser, a.BootstrapSuperuserPassword, m); err != nil {
			return fmt.Errorf("bootstrap superuser %q: %w", a.BootstrapSuperuser, err)
		}
	}
	s.logger.Info("bootstrap superuser created", "user", a.BootstrapSuperuser)
	return nil
}

var _ api.UsersBackend = (*httpBackend)(nil)

func (h *httpBackend) ListUsers(ctx context.Context) ([]api.User, error) {
	img, _ := h.s.meta.Image()
	out := make([]api.User, 0, len(img.Users))
	for _, u := range img.Users {
		out = append(out, api.User{Name: u.Name, Mechanisms: userMechanisms(u)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h *httpBackend) UpsertUser(ctx context.Context, req api.UserRequest) (api.User, error) {
	if err := h.s.upsertUser(ctx, req.Name, req.Password, req.Mechanism); err != nil {
		return api.User{}, userHTTPError(err)
	}
	img, _ := h.s.meta.Image()
	u := img.Users[req.Name]
	if u == nil { // deleted again at once by another request
		return api.User{Name: req.Name, Mechanisms: []string{req.Mechanism}}, nil
	}
	return api.User{Name: u.Name, Mechanisms: userMechanisms(u)}, nil
}

func (h *httpBackend) DeleteUser(ctx context.Context, name string) error {
	_, err := h.s.applyMeta(ctx, raftfsm.Command{DeleteUser: &raftfsm.DeleteUser{Name: name}})
	return userHTTPError(err)
}

// userHTTPError adds the user errors to httpErrors.
func userHTTPError(err error) error {
	switch {
	case errors.Is(err, raftfsm.ErrUnknownUser):
		return &translatedError{kind: api.ErrUnknownUser, err: err}
	case errors.Is(err, errInvalidCredential), errors.Is(err, errUnknownMechanism):
		return &translatedError{kind: api.ErrInvalidRequest, err: err}
	}
	return toHTTPError(err)
}

// checkPassword reports whether password is user's: it derives the stored
// key from the password with the user's salt and iterations and compares
// in constant time (PLAIN, HTTP Basic). An unknown user costs the same
// derivation, so timing does not tell which users exist. A password
// verified before against the same stored key skips the derivation
// (passwordCache).
func (s *Server) checkPassword(user, password string) bool {
	img, _ := s.meta.Image()
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
	if s.passwords.verified(user, password, want.StoredKey) {
		return true
	}
	got, err := deriveScram(mech, user, password, want.Salt, want.Iterations)
	if err != nil || len(want.StoredKey) == 0 {
		return false
	}
	if subtle.ConstantTimeCompare(got.StoredKey, want.StoredKey) != 1 {
		return false
	}
	s.passwords.remember(user, password, want.StoredKey)
	return true
}

var _ kafkaproto.Authenticator = (*kafkaBackend)(nil)

func (k *kafkaBackend) ScramCredential(mechanism, user string) (kafkaproto.ScramCredential, bool) {
	img, _ := k.s.meta.Image()
	c, ok := img.Users[user].Credential(mechanism)
	if !ok {
		return kafkaproto.ScramCredential{}, false
	}
	return kafkaproto.ScramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
}

func (k *kafkaBackend) CheckPassword(user, password string) bool {
	return k.s.checkPassword(user, password)
}
