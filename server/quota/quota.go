// Package quota holds Kafka's client quotas: which quota applies to a
// client (Resolve, with Kafka's precedence of user and client-id entities)
// and how long a client that went over it is throttled (Throttle). Both
// doors use it: the Kafka listener answers throttle_time_ms and mutes the
// connection, the HTTP door answers 429 with Retry-After.
//
// Throttling follows a virtual clock per account (GCRA): charging n units at
// rate r moves the account's clock n/r later; a client is throttled by how
// far that clock is ahead of now beyond one Burst. Over a window W a client
// kept to its throttle gets r*(W+Burst) units, so a measured rate converges
// to r as W grows.
//
// Node (node.go) is a node's quotas: the table of the current metadata
// image (raftfsm), the node's meters, and changes proposed to the
// controller; Node.HTTP (http.go) is the HTTP door's enforcement (api's
// principal and problem answers). Those are the only runnel packages it
// imports. Goroutines: none. Lock order: the Throttler's mutex is a leaf.
package quota

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kafka's quota keys.
const (
	ProducerByteRate  = "producer_byte_rate"
	ConsumerByteRate  = "consumer_byte_rate"
	RequestPercentage = "request_percentage"
)

// Kinds lists the quota keys in a fixed order.
var Kinds = []string{ProducerByteRate, ConsumerByteRate, RequestPercentage}

// Entity names who a quota applies to: a user, a client id, or both; each
// part a name or the default (Kafka's null name).
type Entity struct {
	User            string
	UserDefault     bool
	ClientID        string
	ClientIDDefault bool
}

func (e Entity) hasUser() bool   { return e.User != "" || e.UserDefault }
func (e Entity) hasClient() bool { return e.ClientID != "" || e.ClientIDDefault }

// Quota is one entity's values by quota key.
type Quota struct {
	Entity Entity
	Values map[string]float64
}

// Table resolves the quotas of a set of entities. Immutable once built.
type Table struct {
	byEntity map[Entity]map[string]float64
}

// NewTable indexes qs.
func NewTable(qs []Quota) *Table {
	t := &Table{byEntity: make(map[Entity]map[string]float64, len(qs))}
	for _, q := range qs {
		t.byEntity[q.Entity] = q.Values
	}
	return t
}

// Empty: no quota at all (nothing to enforce).
func (t *Table) Empty() bool { return t == nil || len(t.byEntity) == 0 }

// Account is what a client is charged to: the entity whose quota applied,
// with default parts replaced by the client's own names (as Kafka does: a
// default user quota limits each user on its own).
type Account struct {
	Kind           string
	User, ClientID string
}

// Limit is the quota that applies to a client for one key.
type Limit struct {
	Rate    float64 // per second; bytes, or for request_percentage the percentage
	Account Account
}

// Resolve returns the quota of key for user (the principal's name, without
// "User:") and clientID, in Kafka's precedence: user+client, user+default
// client, user, default user+client, default user+default client, default
// user, client, default client. ok is false when none applies.
func (t *Table) Resolve(key, user, clientID string) (Limit, bool) {
	if t.Empty() {
		return Limit{}, false
	}
	type cand struct {
		e         Entity
		accUser   bool
		accClient bool
	}
	for _, c := range []cand{
		{Entity{User: user, ClientID: clientID}, true, true},
		{Entity{User: user, ClientIDDefault: true}, true, true},
		{Entity{User: user}, true, false},
		{Entity{UserDefault: true, ClientID: clientID}, true, true},
		{Entity{UserDefault: true, ClientIDDefault: true}, true, true},
		{Entity{UserDefault: true}, true, false},
		{Entity{ClientID: clientID}, false, true},
		{Entity{ClientIDDefault: true}, false, true},
	} {
		if (c.e.User == "" && !c.e.UserDefault && c.accUser) || (c.e.ClientID == "" && !c.e.ClientIDDefault && c.accClient) {
			continue // a named part with an empty name: no such entity
		}
		v, ok := t.byEntity[c.e][key]
		if !ok {
			continue
		}
		a := Account{Kind: key}
		if c.accUser {
			a.User = user
		}
		if c.accClient {
			a.ClientID = clientID
		}
		return Limit{Rate: v, Account: a}, true
	}
	return Limit{}, false
}

// Quotas lists the table's entries sorted by entity, for describing.
func (t *Table) Quotas() []Quota {
	if t == nil {
		return nil
	}
	out := make([]Quota, 0, len(t.byEntity))
	for e, v := range t.byEntity {
		out = append(out, Quota{Entity: e, Values: v})
	}
	sort.Slice(out, func(i, j int) bool { return entityLess(out[i].Entity, out[j].Entity) })
	return out
}

func entityLess(a, b Entity) bool {
	if a.UserDefault != b.UserDefault {
		return a.UserDefault
	}
	if a.User != b.User {
		return a.User < b.User
	}
	if a.ClientIDDefault != b.ClientIDDefault {
		return a.ClientIDDefault
	}
	return a.ClientID < b.ClientID
}

// Filter is one component of a DescribeClientQuotas filter: Kind "user" or
// "client-id"; Match "exact" (Name), "default", or "any" (any name or
// default, the part must be present).
type Filter struct {
	Kind, Match, Name string
}

// Matches reports whether e passes every filter; strict also requires
// that e has no part the filters do not name.
func Matches(e Entity, fs []Filter, strict bool) bool {
	var sawUser, sawClient bool
	for _, f := range fs {
		has, def, name := e.hasUser(), e.UserDefault, e.User
		if f.Kind == "client-id" {
			has, def, name = e.hasClient(), e.ClientIDDefault, e.ClientID
			sawClient = true
		} else {
			sawUser = true
		}
		switch {
		case !has:
			return false
		case f.Match == "default" && !def:
			return false
		case f.Match == "exact" && (def || name != f.Name):
			return false
		}
	}
	if strict && ((e.hasUser() && !sawUser) || (e.hasClient() && !sawClient)) {
		return false
	}
	return true
}

// Throttler keeps the accounts' virtual clocks. Safe for concurrent use.
type Throttler struct {
	// Burst is what an account may run ahead of its rate before it is
	// throttled; MaxThrottle bounds one throttle (and the debt kept).
	Burst, MaxThrottle time.Duration
	Now                func() time.Time

	mu        sync.Mutex
	clocks    map[Account]time.Time // guarded by mu
	lastSweep time.Time             // guarded by mu
}

// NewThrottler returns a Throttler with Kafka-like defaults: one second of
// burst, at most 30 s of throttle.
func NewThrottler() *Throttler {
	return &Throttler{Burst: time.Second, MaxThrottle: 30 * time.Second, Now: time.Now}
}

// Charge records amount units (bytes; seconds for request_percentage,
// whose rate is the percentage of one second per second) against l and
// returns how long the client is now throttled (0: not).
func (t *Throttler) Charge(l Limit, amount float64) time.Duration {
	rate := l.Rate
	if l.Account.Kind == RequestPercentage {
		rate /= 100
	}
	if rate <= 0 || math.IsNaN(rate) {
		return 0
	}
	now := t.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	tat := t.clocks[l.Account]
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(time.Duration(amount / rate * float64(time.Second)))
	if limit := now.Add(t.Burst + t.MaxThrottle); tat.After(limit) {
		tat = limit
	}
	t.clocks[l.Account] = tat
	return t.throttle(now, tat)
}

// Throttled is the client's current throttle without charging anything.
func (t *Throttler) Throttled(l Limit) time.Duration {
	now := t.Now()
	t.mu.Lock()
	tat := t.clocks[l.Account]
	t.mu.Unlock()
	return t.throttle(now, tat)
}

func (t *Throttler) throttle(now, tat time.Time) time.Duration {
	if !tat.After(now) {
		return 0 // also a zero tat: Sub would saturate and overflow below
	}
	if d := tat.Sub(now) - t.Burst; d > 0 {
		return d
	}
	return 0
}

// sweepLocked drops, once a minute, the accounts whose clocks are in the
// past: they owe nothing, so forgetting them changes no answer.
func (t *Throttler) sweepLocked(now time.Time) {
	if t.clocks == nil {
		t.clocks = map[Account]time.Time{}
	}
	if now.Sub(t.lastSweep) < time.Minute {
		return
	}
	t.lastSweep = now
	for a, tat := range t.clocks {
		if tat.Before(now) {
			delete(t.clocks, a)
		}
	}
}

// ErrInvalid: a quota entity or value that cannot be stored.
var ErrInvalid = errors.New("invalid quota")

// MaxNameLen bounds an entity name (the metadata log bounds it too).
const MaxNameLen = 256

// Check validates an entity and its values: at least one part, names of
// at most MaxNameLen bytes without NUL, known keys, positive finite values.
func Check(e Entity, values map[string]float64) error {
	if !e.hasUser() && !e.hasClient() {
		return fmt.Errorf("%w: the entity names no user and no client id", ErrInvalid)
	}
	for _, n := range []string{e.User, e.ClientID} {
		if len(n) > MaxNameLen || strings.ContainsRune(n, 0) {
			return fmt.Errorf("%w: an entity name is longer than %d bytes or holds NUL", ErrInvalid, MaxNameLen)
		}
	}
	if (e.UserDefault && e.User != "") || (e.ClientIDDefault && e.ClientID != "") {
		return fmt.Errorf("%w: an entity part is both named and the default", ErrInvalid)
	}
	for k, v := range values {
		if err := CheckKey(k); err != nil {
			return err
		}
		if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("%w: %s = %v (want a positive number)", ErrInvalid, k, v)
		}
	}
	return nil
}

// CheckKey refuses a key that is not a quota key.
func CheckKey(k string) error {
	for _, q := range Kinds {
		if q == k {
			return nil
		}
	}
	return fmt.Errorf("%w: unknown quota key %q (want producer_byte_rate, consumer_byte_rate or request_percentage)", ErrInvalid, k)
}
