package access

import (
	"context"
	"log/slog"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Metadata is what the security surface needs of the metadata log.
type Metadata interface {
	// Image is the newest image this node applied.
	Image() *raftfsm.Image
	// Apply proposes a command and returns once this node shows it.
	Apply(ctx context.Context, cmd raftfsm.Command) error
	// CatchUp waits until this node applied what the active controller
	// had committed when asked; raftfsm.ErrNotLeader when there is none to
	// ask.
	CatchUp(ctx context.Context) error
}

// Config is what an Access is made from.
type Config struct {
	Meta Metadata
	// Required: clients authenticate and are authorized (--auth
	// required); otherwise every client may do everything.
	Required bool
	// SuperUsers are principals ("User:name") that bypass authorization.
	SuperUsers []string
	// BootstrapSuperuser is created (SCRAM-SHA-256 and -512) with
	// BootstrapSuperuserPassword when the metadata has no user of that
	// name; it is a superuser too.
	BootstrapSuperuser         string
	BootstrapSuperuserPassword string
	// Now is the node's wall clock (token expiry is compared on every
	// node); nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Access is a node's security surface (see the package doc).
type Access struct {
	cfg       Config
	authz     authzCache    // the authorizer of the last image (acls.go)
	passwords passwordCache // passwords verified (passwordcache.go)
	sessions  sessionStore  // UI sessions (session.go)
}

// New returns the security surface of cfg.
func New(cfg Config) *Access {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Access{cfg: cfg}
}

// Required reports whether clients must authenticate (--auth required).
func (a *Access) Required() bool { return a.cfg.Required }
