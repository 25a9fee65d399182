package raftfsm

import (
	"errors"
	"fmt"
)

// API tokens: only a SHA-256 of each token's secret is stored, with its
// principal and expiry; the node draws the id and the secret before
// proposing. Result of both commands: nil.

// ErrUnknownToken: DeleteToken names no token.
var ErrUnknownToken = errors.New("raftfsm: unknown token")

const (
	maxTokenIDLen = 64
	prefixTokens  = "tokens/"
)

// Token is one API token.
type Token struct {
	ID        string
	Principal string   // "User:alice"
	Hash      [32]byte // SHA-256 of the secret
	CreatedMs int64    // unix milliseconds
	ExpiresMs int64
}

// CreateToken stores a token.
type CreateToken struct{ Token Token }

// DeleteToken removes a token; ErrUnknownToken when there is none.
type DeleteToken struct{ ID string }

func tokenKey(id string) string { return prefixTokens + id }

func checkTokenID(id string) error {
	if id == "" || len(id) > maxTokenIDLen {
		return fmt.Errorf("%w: token id of %d bytes (want 1 to %d)", ErrInvalidCommand, len(id), maxTokenIDLen)
	}
	return nil
}

func checkCreateToken(c *CreateToken) error {
	if err := checkTokenID(c.Token.ID); err != nil {
		return err
	}
	if len(c.Token.Principal) > MaxUserNameLen+len("User:") || c.Token.ExpiresMs <= c.Token.CreatedMs {
		return fmt.Errorf("%w: token principal too long or expiry not after creation", ErrInvalidCommand)
	}
	return nil
}

func (c *change) createToken(cmd *CreateToken) (any, error) {
	t := cmd.Token
	c.img.tokens()[t.ID] = &t
	c.writes = append(c.writes, write{tokenKey(t.ID), mustJSON(&t)})
	return nil, nil
}

func (c *change) deleteToken(cmd *DeleteToken) (any, error) {
	if _, ok := c.img.Tokens[cmd.ID]; !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownToken, cmd.ID)
	}
	delete(c.img.tokens(), cmd.ID)
	c.writes = append(c.writes, write{key: tokenKey(cmd.ID)})
	return nil, nil
}
