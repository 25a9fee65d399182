package quota

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Node is a node's quotas: the table of the current metadata image (built
// once per image) and the node's meters. Both doors charge through it;
// each node meters its own clients, as each Kafka broker does. Safe for
// concurrent use.
type Node struct {
	image func() *raftfsm.Image
	apply func(context.Context, raftfsm.Command) (any, error)
	cur   atomic.Pointer[nodeEntry]
	th    *Throttler
}

type nodeEntry struct {
	img *raftfsm.Image
	t   *Table
}

// NewNode reads the quotas from image's and stores changes with apply (a
// proposal to the controller that returns once this node applied it).
func NewNode(image func() *raftfsm.Image, apply func(context.Context, raftfsm.Command) (any, error)) *Node {
	return &Node{image: image, apply: apply, th: NewThrottler()}
}

func toEntity(e raftfsm.QuotaEntity) Entity {
	return Entity{User: e.User, UserDefault: e.UserDefault, ClientID: e.ClientID, ClientIDDefault: e.ClientIDDefault}
}

func fromEntity(e Entity) raftfsm.QuotaEntity {
	return raftfsm.QuotaEntity{User: e.User, UserDefault: e.UserDefault, ClientID: e.ClientID, ClientIDDefault: e.ClientIDDefault}
}

// Table returns the quotas of the current metadata.
func (n *Node) Table() *Table {
	img := n.image()
	if e := n.cur.Load(); e != nil && e.img == img {
		return e.t
	}
	qs := make([]Quota, 0, len(img.Quotas))
	for _, q := range img.Quotas {
		qs = append(qs, Quota{Entity: toEntity(q.Entity), Values: q.Values})
	}
	t := NewTable(qs)
	n.cur.Store(&nodeEntry{img: img, t: t})
	return t
}

// User is the user a principal is metered as.
func User(principal string) string {
	if u, ok := strings.CutPrefix(principal, "User:"); ok && u != "" {
		return u
	}
	return "ANONYMOUS" // Kafka's principal for a client that did not authenticate
}

// Charge charges a served request and returns the longest throttle of the
// quotas of t that apply (0: none).
func (n *Node) Charge(t *Table, user, clientID string, produced, fetched int, elapsed time.Duration) time.Duration {
	var d time.Duration
	charge := func(kind string, amount float64) {
		if l, ok := t.Resolve(kind, user, clientID); ok {
			d = max(d, n.th.Charge(l, amount))
		}
	}
	if produced > 0 {
		charge(ProducerByteRate, float64(produced))
	}
	if fetched > 0 {
		charge(ConsumerByteRate, float64(fetched))
	}
	charge(RequestPercentage, elapsed.Seconds())
	return d
}

// Throttled is how long a client is still throttled by the quotas of kinds.
func (n *Node) Throttled(t *Table, user, clientID string, kinds ...string) time.Duration {
	var d time.Duration
	for _, k := range kinds {
		if l, ok := t.Resolve(k, user, clientID); ok {
			d = max(d, n.th.Throttled(l))
		}
	}
	return d
}

// List returns the stored quotas match accepts.
func (n *Node) List(match func(Entity) bool) []Quota {
	var out []Quota
	for _, q := range n.Table().Quotas() {
		if match(q.Entity) {
			out = append(out, q)
		}
	}
	return out
}

// Alter stores e's values: set alone when replace, else set and remove
// merged into the current values by the controller's state machine, in the
// log's order (raftfsm.Quota.Merge), not into this node's image, which may
// lag: a change made meanwhile through another node would be lost (issue
// 20). It returns the values stored as this node then sees them; a dry run
// (validateOnly) stores nothing and merges into the image.
func (n *Node) Alter(ctx context.Context, e Entity, set map[string]float64, remove []string, replace, validateOnly bool) (map[string]float64, error) {
	for _, k := range remove {
		if err := CheckKey(k); err != nil {
			return nil, err
		}
	}
	if err := Check(e, set); err != nil { // each key on its own: any merge of them is valid
		return nil, err
	}
	if !validateOnly {
		q := raftfsm.Quota{Entity: fromEntity(e), Values: set}
		if !replace {
			q.Remove, q.Merge = remove, true
		}
		if _, err := n.apply(ctx, raftfsm.Command{SetQuotas: &raftfsm.SetQuotas{Quotas: []raftfsm.Quota{q}}}); err != nil {
			return nil, err
		}
		if replace {
			return set, nil
		}
	}
	vals := map[string]float64{}
	if !replace {
		for k, v := range n.image().Quotas[fromEntity(e).Key()].Values {
			vals[k] = v
		}
	}
	if validateOnly {
		for _, k := range remove {
			delete(vals, k)
		}
		for k, v := range set {
			vals[k] = v
		}
	}
	return vals, nil
}
