package raftfsm

import (
	"fmt"
	"math"
	"strings"
)

// Client quotas: Kafka's quota entities (user, client id, or both; a name
// or the default) with their values (producer_byte_rate,
// consumer_byte_rate, request_percentage), stored as given; the server
// resolves which entity applies to a client and enforces them. Result of
// SetQuotas: nil. Setting an entity with no values removes it.

// Bounds of a quota command.
const (
	MaxQuotasPerCommand = 1000
	maxQuotaNameLen     = 256
	prefixQuotas        = "quotas/"
)

// QuotaEntity names who a quota applies to. The entity includes the user
// when User is set or UserDefault (Kafka's default user, a null name), and
// the client id likewise; at least one of the two.
type QuotaEntity struct {
	User            string `json:",omitempty"`
	UserDefault     bool   `json:",omitempty"`
	ClientID        string `json:",omitempty"`
	ClientIDDefault bool   `json:",omitempty"`
}

// HasUser: the entity includes the user part.
func (e QuotaEntity) HasUser() bool { return e.User != "" || e.UserDefault }

// HasClientID: the entity includes the client id part.
func (e QuotaEntity) HasClientID() bool { return e.ClientID != "" || e.ClientIDDefault }

// Key is the entity's identity (NUL cannot occur in names, checkQuotas
// refuses it).
func (e QuotaEntity) Key() string {
	part := func(has, def bool, name string) string {
		switch {
		case def:
			return "\x01"
		case has:
			return "=" + name
		}
		return ""
	}
	return part(e.HasUser(), e.UserDefault, e.User) + "\x00" + part(e.HasClientID(), e.ClientIDDefault, e.ClientID)
}

// Quota is one entity's values, by Kafka's quota keys.
type Quota struct {
	Entity QuotaEntity
	Values map[string]float64
	// Merge: the entity's current values, in the log's order, without the
	// keys of Remove, with Values added (Kafka's AlterClientQuotas), instead
	// of Values alone. A node merging into its own image, which may lag,
	// would lose a change made meanwhile through another node.
	Merge  bool     `json:",omitempty"`
	Remove []string `json:",omitempty"`
}

// SetQuotas replaces (or, with Merge, changes) the values of each entity;
// an entity left with no values is removed.
type SetQuotas struct{ Quotas []Quota }

// QuotaKeys are the quota keys a value may have.
var QuotaKeys = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}

func quotaKey(e QuotaEntity) string { return prefixQuotas + e.Key() }

func checkQuotas(qs []Quota) error {
	if len(qs) == 0 || len(qs) > MaxQuotasPerCommand {
		return fmt.Errorf("%w: %d quotas in one command (want 1 to %d)", ErrInvalidCommand, len(qs), MaxQuotasPerCommand)
	}
	for _, q := range qs {
		e := q.Entity
		if !e.HasUser() && !e.HasClientID() {
			return fmt.Errorf("%w: a quota entity names no user and no client id", ErrInvalidCommand)
		}
		for _, n := range []string{e.User, e.ClientID} {
			if len(n) > maxQuotaNameLen || strings.ContainsRune(n, 0) {
				return fmt.Errorf("%w: a quota entity name is longer than %d bytes or holds NUL", ErrInvalidCommand, maxQuotaNameLen)
			}
		}
		if (e.UserDefault && e.User != "") || (e.ClientIDDefault && e.ClientID != "") {
			return fmt.Errorf("%w: a quota entity part is both named and the default", ErrInvalidCommand)
		}
		if len(q.Remove) > len(QuotaKeys) {
			return fmt.Errorf("%w: %d quota keys to remove (at most %d)", ErrInvalidCommand, len(q.Remove), len(QuotaKeys))
		}
		for _, k := range q.Remove {
			if !isQuotaKey(k) {
				return fmt.Errorf("%w: unknown quota key %q", ErrInvalidCommand, k)
			}
		}
		for k, v := range q.Values {
			if !isQuotaKey(k) {
				return fmt.Errorf("%w: unknown quota key %q", ErrInvalidCommand, k)
			}
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("%w: quota %s = %v (want a positive number)", ErrInvalidCommand, k, v)
			}
		}
	}
	return nil
}

func isQuotaKey(k string) bool {
	for _, q := range QuotaKeys {
		if q == k {
			return true
		}
	}
	return false
}

func (c *change) setQuotas(cmd *SetQuotas) (any, error) {
	for _, q := range cmd.Quotas {
		k := q.Entity.Key()
		if q.Merge {
			vals := make(map[string]float64, len(QuotaKeys))
			for vk, v := range c.img.Quotas[k].Values {
				vals[vk] = v
			}
			for _, vk := range q.Remove {
				delete(vals, vk)
			}
			for vk, v := range q.Values {
				vals[vk] = v
			}
			q = Quota{Entity: q.Entity, Values: vals}
		}
		if len(q.Values) == 0 {
			if _, ok := c.img.Quotas[k]; ok {
				delete(c.img.quotas(), k)
				c.writes = append(c.writes, write{key: quotaKey(q.Entity)})
			}
			continue
		}
		vals := make(map[string]float64, len(q.Values))
		for vk, v := range q.Values {
			vals[vk] = v
		}
		q.Values = vals
		c.img.quotas()[k] = q
		c.writes = append(c.writes, write{quotaKey(q.Entity), mustJSON(q)})
	}
	return nil, nil
}
