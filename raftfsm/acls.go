package raftfsm

import (
	"fmt"
	"strings"
)

// ACLs: Kafka's access control entries, stored as given (the server
// validates and decides with them; this package only keeps them). Result
// of both commands: nil. Creating an existing entry or deleting a missing
// one changes nothing.

// Bounds of an ACL command.
const (
	MaxACLsPerCommand = 1000
	maxACLFieldLen    = 512
	prefixACLs        = "acls/"
)

// ACLEntry is one access control entry.
type ACLEntry struct {
	ResourceType, ResourceName, PatternType string
	Principal, Host, Operation, Permission  string
}

// Key is the entry's identity: its fields joined (NUL cannot occur in
// them, checkACLs refuses it).
func (a ACLEntry) Key() string {
	return strings.Join([]string{a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission}, "\x00")
}

// CreateACLs adds entries.
type CreateACLs struct{ ACLs []ACLEntry }

// DeleteACLs removes entries (exactly these; the node resolves filters
// before proposing).
type DeleteACLs struct{ ACLs []ACLEntry }

func aclKey(a ACLEntry) string { return prefixACLs + a.Key() }

func checkACLs(as []ACLEntry) error {
	if len(as) == 0 || len(as) > MaxACLsPerCommand {
		return fmt.Errorf("%w: %d ACLs in one command (want 1 to %d)", ErrInvalidCommand, len(as), MaxACLsPerCommand)
	}
	for _, a := range as {
		for _, f := range []string{a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission} {
			if f == "" || len(f) > maxACLFieldLen || strings.ContainsRune(f, 0) {
				return fmt.Errorf("%w: an ACL field is empty, longer than %d bytes or holds NUL", ErrInvalidCommand, maxACLFieldLen)
			}
		}
	}
	return nil
}

func (c *change) createACLs(cmd *CreateACLs) (any, error) {
	for _, a := range cmd.ACLs {
		c.img.acls()[a.Key()] = a
		c.writes = append(c.writes, write{aclKey(a), mustJSON(a)})
	}
	return nil, nil
}

func (c *change) deleteACLs(cmd *DeleteACLs) (any, error) {
	for _, a := range cmd.ACLs {
		if _, ok := c.img.ACLs[a.Key()]; ok {
			delete(c.img.acls(), a.Key())
			c.writes = append(c.writes, write{key: aclKey(a)})
		}
	}
	return nil, nil
}
