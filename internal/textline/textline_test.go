package textline

import (
	"slices"
	"testing"
)

// TestFields: runs of blanks of any kind separate fields, leading and
// trailing ones count for nothing, and a line with more fields than f
// holds is refused.
func TestFields(t *testing.T) {
	for _, tc := range []struct {
		ln   string
		size int
		want []string
		ok   bool
	}{
		{"", 3, nil, true},
		{" \t\r\n", 3, nil, true},
		{"epoch 1 0\n", 3, []string{"epoch", "1", "0"}, true},
		{"  topic\ta  \t 0102 2\r\n", 4, []string{"topic", "a", "0102", "2"}, true},
		{"0 1", 2, []string{"0", "1"}, true},
		{"0 1 2", 2, []string{"0", "1"}, false},
		{"x", 0, nil, false},
	} {
		f := make([]string, tc.size)
		n, ok := Fields(tc.ln, f)
		if ok != tc.ok || !slices.Equal(f[:n], tc.want) {
			t.Errorf("Fields(%q) into %d: %q, %v; want %q, %v", tc.ln, tc.size, f[:n], ok, tc.want, tc.ok)
		}
	}
}

// TestFieldsAllocatesNothing: the decoders of untrusted bytes call it on
// every line.
func TestFieldsAllocatesNothing(t *testing.T) {
	var f [4]string
	if a := testing.AllocsPerRun(100, func() { Fields(" recovery-point  7 \n", f[:]) }); a != 0 {
		t.Fatalf("Fields allocated %v times per call", a)
	}
}
