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

// next returns a shallow copy of img for the command at index: the maps are
// copied, the *Broker and *Topic values shared until replaced. Topics is
// persistent and shared as it is (its changes make new versions), so that
// the cost of a batch does not grow with the number of topics.
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
		Users:          make(map[string]*User, len(img.Users)),
		ACLs:           make(map[string]ACLEntry, len(img.ACLs)),
		Tokens:         make(map[string]*Token, len(img.Tokens)),
		Quotas:         make(map[string]Quota, len(img.Quotas)),
	}
	for k, v := range img.Quotas {
		n.Quotas[k] = v
	}
	for k, v := range img.Users {
		n.Users[k] = v
	}
	for k, v := range img.ACLs {
		n.ACLs[k] = v
	}
	for k, v := range img.Tokens {
		n.Tokens[k] = v
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
	return &Image{Brokers: map[int32]*Broker{}, Users: map[string]*User{}, ACLs: map[string]ACLEntry{}, Tokens: map[string]*Token{}, Quotas: map[string]Quota{}}
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
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
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
