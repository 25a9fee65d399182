package raftfsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync/atomic"
)

// Digest is a hash of the image's content (not Index), equal on every node
// that applied the same log.
func (img *Image) Digest() string {
	// encoding/json writes map keys sorted, so this encoding is canonical.
	b, err := json.Marshal(struct {
		ClusterID      string
		Brokers        map[int32]*Broker
		Topics         TopicMap
		NextProducerID int64
		Users          map[string]*User    `json:",omitempty"` // omitted: digests without users stay as they were
		ACLs           map[string]ACLEntry `json:",omitempty"`
		Tokens         map[string]*Token   `json:",omitempty"`
		Quotas         map[string]Quota    `json:",omitempty"`
		CommandVersion uint8               `json:",omitempty"` // omitted: digests before versioning stay as they were
	}{img.ClusterID, img.Brokers, img.Topics, img.NextProducerID, img.Users, img.ACLs, img.Tokens, img.Quotas, img.CommandVersion})
	if err != nil {
		// Only plain data types: cannot happen.
		panic("raftfsm: digest: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// next returns a shallow copy of img for the command at index: the brokers
// map is copied, the *Broker and *Topic values shared until replaced. Topics
// is persistent and shared as it is (its changes make new versions), and
// the access maps (Users, ACLs, Tokens, Quotas) are shared until a command
// of the batch changes one (users(), acls(), tokens(), quotas() copy it
// then), so that the cost of a batch grows neither with the number of
// topics nor with the ACLs and users held (copying 10,000 ACLs made each
// topic creation cost 37-110x as much: BenchmarkApplyCreateWithACLs).
func (img *Image) next(index uint64) *Image {
	n := &Image{
		Index:          index,
		ClusterID:      img.ClusterID,
		Brokers:        make(map[int32]*Broker, len(img.Brokers)),
		Topics:         img.Topics,
		NextProducerID: img.NextProducerID,
		CommandVersion: img.CommandVersion,
		changes:        img.changes,
		changesFrom:    img.changesFrom,
		tracked:        img.tracked,
		Users:          img.Users,
		ACLs:           img.ACLs,
		Tokens:         img.Tokens,
		Quotas:         img.Quotas,
		aclsVersion:    img.aclsVersion,
	}
	for k, v := range img.Brokers {
		n.Brokers[k] = v
	}
	if img.load != nil {
		n.load = img.load.clone()
	} else {
		n.load = scanLoad(img)
	}
	return n
}

func emptyImage() *Image {
	return &Image{Brokers: map[int32]*Broker{}, Users: map[string]*User{}, ACLs: map[string]ACLEntry{}, Tokens: map[string]*Token{}, Quotas: map[string]Quota{},
		aclsVersion: aclsVersions.Add(1)}
}

// Which access maps an image being built by a change holds as its own
// copy (the ones it shares with the image before it must not be written).
type ownedMaps uint8

const (
	ownUsers ownedMaps = 1 << iota
	ownACLs
	ownTokens
	ownQuotas
)

// aclsVersions numbers the ACL maps the state machine makes: two images
// with the same aclsVersion hold the very same ACLs.
var aclsVersions atomic.Uint64

// SameACLs reports whether img holds the very ACL map of prev, which the
// state machine shares between images until a command changes the ACLs:
// true means the same entries; false means they may differ (images built
// outside the state machine always answer false).
func (img *Image) SameACLs(prev *Image) bool {
	return img.aclsVersion != 0 && prev != nil && img.aclsVersion == prev.aclsVersion
}

// writable copies *m the first time a change writes it (own marks it
// copied for the rest of the batch) and returns it.
func writable[K comparable, V any](img *Image, m *map[K]V, own ownedMaps) map[K]V {
	if img.owned&own == 0 {
		c := make(map[K]V, len(*m)+1)
		for k, v := range *m {
			c[k] = v
		}
		*m = c
		img.owned |= own
	}
	return *m
}

func (img *Image) users() map[string]*User   { return writable(img, &img.Users, ownUsers) }
func (img *Image) tokens() map[string]*Token { return writable(img, &img.Tokens, ownTokens) }
func (img *Image) quotas() map[string]Quota  { return writable(img, &img.Quotas, ownQuotas) }
func (img *Image) acls() map[string]ACLEntry {
	if img.owned&ownACLs == 0 {
		img.aclsVersion = aclsVersions.Add(1)
	}
	return writable(img, &img.ACLs, ownACLs)
}

// clone returns a deep copy of t, for modification before it is published.
func (t *Topic) clone() *Topic {
	c := *t
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	c.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = p.clone()
	}
	return &c
}

// withPartitions returns a copy of t whose Partitions slice is its own, for
// changing partitions by replacing them: the replica lists and the configs
// stay shared with t, so the caller must replace them, never modify them
// (setPartition does). A leader move then costs one copy of the partition
// structs instead of four slice allocations per partition of the topic.
func (t *Topic) withPartitions() *Topic {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}

func (p Partition) clone() Partition {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	if p.Reassignment != nil {
		p.Reassignment = &Reassignment{Adding: slices.Clone(p.Reassignment.Adding), Removing: slices.Clone(p.Reassignment.Removing)}
	}
	return p
}

// published is one image and the channel closed when it is replaced.
type published struct {
	img     *Image
	changed chan struct{}
}

// imageHolder publishes images. Load is safe for concurrent use; publish is
// called only from the FSM goroutine (raft serialises Apply and Restore).
type imageHolder struct {
	cur atomic.Pointer[published]
}

func (h *imageHolder) load() (*Image, <-chan struct{}) {
	p := h.cur.Load()
	return p.img, p.changed
}

func (h *imageHolder) publish(img *Image) {
	old := h.cur.Swap(&published{img: img, changed: make(chan struct{})})
	if old != nil {
		close(old.changed)
	}
}
