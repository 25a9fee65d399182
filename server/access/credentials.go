package access

import (
	"context"
	"fmt"

	"github.com/runnel/runnel/api"
)

var _ api.Authenticator = (*Access)(nil)

// CheckCredentials checks HTTP credentials against the stored users, the
// API tokens and the UI sessions (api.Authenticate).
func (a *Access) CheckCredentials(ctx context.Context, c api.Credentials) (string, error) {
	switch c.Scheme {
	case "basic":
		if c.User != "" && a.CheckPassword(c.User, c.Password) {
			return "User:" + c.User, nil
		}
		return "", fmt.Errorf("%w: wrong user name or password", api.ErrUnauthenticated)
	case "session":
		return a.checkSession(c)
	case "bearer":
		p, err := a.CheckToken(c.Token)
		if err != nil {
			return "", fmt.Errorf("%w: %v", api.ErrUnauthenticated, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: unsupported scheme", api.ErrUnauthenticated)
}
