package groups

import (
	"bytes"
	"testing"
)

func TestJavaStringHash(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -1 << 31}, // Integer.MIN_VALUE
		{"\U0001F600", 55357*31 + 56832}, // a surrogate pair: two UTF-16 units
		{"é", 233},
	} {
		if got := javaStringHash(tc.s); got != tc.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestGroupPartition(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"polygenelubricants", 50, 0}, // Utils.abs(MIN_VALUE) is 0
		{"hello", 50, 99162322 % 50},
		{"my-group", 50, 1906497762 % 50},
		{"Aa", 3, 2112 % 3},
		{"\U0001F600", 7, (55357*31 + 56832) % 7},
	} {
		if got := Partition(tc.group, tc.n); got != tc.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
	// A negative hash is made positive, as Math.abs does.
	if h := javaStringHash("my-group"); h >= 0 {
		t.Fatalf("want a negative hash for the test, got %d", h)
	} else if got, want := Partition("my-group", 50), (-h)%50; got != want {
		t.Errorf("Partition(my-group) = %d, want %d", got, want)
	}
}

func TestGroupKeys(t *testing.T) {
	for _, tc := range []struct {
		key   []byte
		kind  int16
		group string
		tp    tp
	}{
		{offsetKey("g", tp{Topic: "orders", Partition: 7}), recordKindOffset, "g", tp{Topic: "orders", Partition: 7}},
		{offsetKey("", tp{Topic: "t", Partition: 1<<31 - 1}), recordKindOffset, "", tp{Topic: "t", Partition: 1<<31 - 1}},
		{groupKey("with/slash and ünïcode"), recordKindGroup, "with/slash and ünïcode", tp{}},
	} {
		kind, group, got, err := parseGroupKey(tc.key)
		if err != nil || kind != tc.kind || group != tc.group || got != tc.tp {
			t.Errorf("parseGroupKey(%x) = %d %q %+v %v", tc.key, kind, group, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1}, {0, 1, 0, 5, 'a'}, {0, 3, 0, 0}, append(groupKey("g"), 0),
		append(offsetKey("g", tp{Topic: "t"}), 0)} {
		if _, _, _, err := parseGroupKey(bad); err == nil {
			t.Errorf("parseGroupKey(%x) accepted", bad)
		}
	}
}

// FuzzGroupKey: keys read back from __consumer_offsets never panic the
// loader, and what parses re-encodes to the same bytes.
func FuzzGroupKey(f *testing.F) {
	f.Add(offsetKey("g", tp{Topic: "t", Partition: 3}))
	f.Add(groupKey("group"))
	f.Add([]byte{0, 2, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, key []byte) {
		kind, group, part, err := parseGroupKey(key)
		if err != nil {
			return
		}
		var again []byte
		if kind == recordKindGroup {
			again = groupKey(group)
		} else {
			again = offsetKey(group, part)
		}
		if !bytes.Equal(again, key) {
			t.Fatalf("%x parsed as %d %q %+v re-encodes to %x", key, kind, group, part, again)
		}
	})
}

func TestRangeAssignmentEncoding(t *testing.T) {
	in := []assignedTopic{{Topic: "a", Partitions: []int32{0, 1}}, {Topic: "b", Partitions: []int32{5}}}
	out := decodeAssignment(encodeAssignment(in))
	if len(out) != 2 || out[0].Topic != "a" || len(out[0].Partitions) != 2 || out[1].Partitions[0] != 5 {
		t.Fatalf("round trip %+v", out)
	}
	if topics := decodeSubscription(encodeSubscription([]string{"x", "y"}, in)); len(topics) != 2 || topics[1] != "y" {
		t.Fatalf("subscription round trip %v", topics)
	}
	if decodeAssignment([]byte{1, 2, 3}) != nil || decodeSubscription([]byte{0xff}) != nil {
		t.Fatal("garbage decoded")
	}
}
