package raftfsm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// TestTopicMapModel checks TopicMap against a Go map under random changes:
// every version keeps its content after later changes (the FSM publishes
// each one to readers that hold it), lists in name order, pages from any
// name, and encodes to JSON as the map did (image digests depend on it).
func TestTopicMapModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m TopicMap
	model := map[string]*Topic{}
	type version struct {
		m     TopicMap
		model map[string]*Topic
	}
	var versions []version
	for i := range 2000 {
		name := fmt.Sprintf("t%d", rng.IntN(300))
		if rng.IntN(3) == 0 {
			m = m.Without(name)
			delete(model, name)
		} else {
			tp := &Topic{Name: name, Partitions: make([]Partition, i%5)}
			m = m.With(tp)
			model[name] = tp
		}
		if i%100 == 0 {
			versions = append(versions, version{m, cloneMap(model)})
		}
	}
	versions = append(versions, version{m, model})
	for _, v := range versions {
		checkTopicMap(t, v.m, v.model)
	}
	empty := TopicMap{}
	if empty.Len() != 0 || empty.Get("x") != nil || len(empty.Names()) != 0 {
		t.Fatal("the zero TopicMap is not empty")
	}
}

func checkTopicMap(t *testing.T, m TopicMap, model map[string]*Topic) {
	t.Helper()
	if m.Len() != len(model) {
		t.Fatalf("Len %d, want %d", m.Len(), len(model))
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range model {
			if !yield(k) {
				return
			}
		}
	})
	if got := m.Names(); !slices.Equal(got, names) {
		t.Fatalf("names %v, want %v", got, names)
	}
	for _, n := range names {
		if got, ok := m.Lookup(n); !ok || got != model[n] {
			t.Fatalf("Lookup(%q) = %p %v, want %p", n, got, ok, model[n])
		}
	}
	if _, ok := m.Lookup("absent"); ok {
		t.Fatal("Lookup found an absent name")
	}
	for _, from := range []string{"", "t1", "t15", "t299", "t3", "u"} {
		var got []string
		for name, tp := range m.From(from) {
			if tp != model[name] {
				t.Fatalf("From(%q) yields %q with another topic", from, name)
			}
			got = append(got, name)
		}
		i, _ := slices.BinarySearch(names, from)
		if want := names[i:]; !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("From(%q) = %v, want %v", from, got, want)
		}
	}
	a, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(model)
	if string(a) != string(b) {
		t.Fatalf("JSON %s, map's %s", a, b)
	}
	var back TopicMap
	if err := json.Unmarshal(a, &back); err != nil || back.Len() != len(model) {
		t.Fatalf("decoded %d topics, err %v", back.Len(), err)
	}
}

func cloneMap(m map[string]*Topic) map[string]*Topic {
	c := make(map[string]*Topic, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestTopicsChangedSince: after any earlier image it remembers, an image
// names every topic whose version differs (created, changed, deleted), so a
// broker that looks at those alone ends where a full comparison would; past
// what it remembers, it says so.
func TestTopicsChangedSince(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	index := uint64(1)
	applyAt(t, f, index, reg(1, ""))
	rng := rand.New(rand.NewPCG(3, 4))
	first, _ := f.images.load()
	images := []*Image{first}
	for batch := range 2*maxTopicChangeBatches + 200 {
		var logs []*raft.Log
		for i := range 1 + rng.IntN(3) {
			index++
			name := fmt.Sprintf("t%d", rng.IntN(40))
			var cmd Command
			switch op := rng.IntN(3); {
			case i == 0 && batch%2 == 0:
				cmd = create(fmt.Sprintf("u%d", batch), []int32{1}) // every other batch changes a topic
			case op == 0:
				cmd = create(name, []int32{1})
			case op == 1:
				cmd = Command{DeleteTopic: &DeleteTopic{Name: name}}
			default:
				cmd = Command{AlterConfigs: &AlterConfigs{Topic: name, Set: map[string]string{"retention.ms": fmt.Sprint(batch)}}}
			}
			cmd.Version = CommandVersion
			data, err := EncodeCommand(cmd)
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, &raft.Log{Index: index, Type: raft.LogCommand, Data: data})
		}
		f.ApplyBatch(logs)
		img, _ := f.images.load()
		images = append(images, img)
	}
	last := images[len(images)-1]
	remembered := 0
	for _, old := range images {
		names, ok := last.TopicsChangedSince(old.Index)
		if !ok {
			continue
		}
		remembered++
		changed := map[string]bool{}
		for n := range names {
			changed[n] = true
		}
		for name, tp := range last.Topics.All() {
			if old.Topics.Get(name) != tp && !changed[name] {
				t.Fatalf("since %d: %q changed, not named", old.Index, name)
			}
		}
		for name := range old.Topics.All() {
			if _, ok := last.Topics.Lookup(name); !ok && !changed[name] {
				t.Fatalf("since %d: %q deleted, not named", old.Index, name)
			}
		}
	}
	if remembered < maxTopicChangeBatches {
		t.Fatalf("%d of %d images remembered", remembered, len(images))
	}
	if _, ok := last.TopicsChangedSince(first.Index); ok {
		t.Fatal("remembers further back than its bound")
	}
	if _, ok := last.TopicsChangedSince(last.Index + 1); ok {
		t.Fatal("answers for a later index")
	}
}

// TestTopicsChangedSinceUntracked: an image built outside the FSM knows
// nothing of its changes and says so.
func TestTopicsChangedSinceUntracked(t *testing.T) {
	img := &Image{Index: 10, Topics: TopicMapOf(&Topic{Name: "a"})}
	if _, ok := img.TopicsChangedSince(5); ok {
		t.Fatal("an image built outside the FSM claims to know its changes")
	}
}
