package raftfsm

import (
	"encoding/json"
	"iter"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
)

// TopicMap is an image's topics by name: an immutable, persistent map (a
// radix tree) kept in name order. A changed version shares every node with
// the one it came from except the path to the changed name, so the FSM's
// next image costs O(change) to make, however many topics there are, where
// copying a Go map cost O(topics) for every applied batch.
//
// The zero value is an empty map. A TopicMap never changes: it is safe for
// concurrent use, and With and Without return new maps.
type TopicMap struct {
	tree *iradix.Tree[*Topic]
}

// TopicMapOf returns a map of the given topics (the last wins on a repeated
// name); for images built outside the FSM.
func TopicMapOf(topics ...*Topic) TopicMap {
	txn := iradix.New[*Topic]().Txn()
	for _, t := range topics {
		txn.Insert([]byte(t.Name), t)
	}
	return TopicMap{txn.CommitOnly()}
}

// Get returns the topic called name, or nil.
func (m TopicMap) Get(name string) *Topic {
	t, _ := m.Lookup(name)
	return t
}

// Lookup returns the topic called name and whether there is one.
func (m TopicMap) Lookup(name string) (*Topic, bool) {
	if m.tree == nil {
		return nil, false
	}
	return m.tree.Get([]byte(name))
}

// Len returns the number of topics.
func (m TopicMap) Len() int {
	if m.tree == nil {
		return 0
	}
	return m.tree.Len()
}

// All yields every topic in name order.
func (m TopicMap) All() iter.Seq2[string, *Topic] { return m.From("") }

// From yields the topics whose names are at or after name, in name order:
// a page of a listing starts here without visiting the names before it.
func (m TopicMap) From(name string) iter.Seq2[string, *Topic] {
	return func(yield func(string, *Topic) bool) {
		if m.tree == nil {
			return
		}
		it := m.tree.Root().Iterator()
		if name != "" {
			it.SeekLowerBound([]byte(name))
		}
		for k, t, ok := it.Next(); ok; k, t, ok = it.Next() {
			if !yield(string(k), t) {
				return
			}
		}
	}
}

// Names returns every topic name in order.
func (m TopicMap) Names() []string {
	names := make([]string, 0, m.Len())
	for name := range m.All() {
		names = append(names, name)
	}
	return names
}

// With returns a map holding t under t.Name in place of any topic of that name.
func (m TopicMap) With(t *Topic) TopicMap {
	tree := m.tree
	if tree == nil {
		tree = iradix.New[*Topic]()
	}
	tree, _, _ = tree.Insert([]byte(t.Name), t)
	return TopicMap{tree}
}

// Without returns a map without the topic called name.
func (m TopicMap) Without(name string) TopicMap {
	if m.tree == nil {
		return m
	}
	tree, _, _ := m.tree.Delete([]byte(name))
	return TopicMap{tree}
}

// MarshalJSON writes the map as a JSON object by name, in name order (the
// encoding a Go map had, so image digests are unchanged).
func (m TopicMap) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for name, t := range m.All() {
		if len(b) > 1 {
			b = append(b, ',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a JSON object by name.
func (m *TopicMap) UnmarshalJSON(b []byte) error {
	var topics map[string]*Topic
	if err := json.Unmarshal(b, &topics); err != nil {
		return err
	}
	txn := iradix.New[*Topic]().Txn()
	for name, t := range topics {
		txn.Insert([]byte(name), t)
	}
	*m = TopicMap{txn.CommitOnly()}
	return nil
}
