package vfs

import "testing"

func TestKernelRelease(t *testing.T) {
	for _, c := range []struct {
		rel          string
		major, minor int
		ok           bool
	}{
		{"6.1.0-18-amd64", 6, 1, true},
		{"5.8.0", 5, 8, true},
		{"5.4.0-150-generic", 5, 4, true},
		{"4.19", 4, 19, true},
		{"5.10+", 5, 10, true},
		{"weird", 0, 0, false},
		{"", 0, 0, false},
	} {
		major, minor, ok := kernelRelease(c.rel)
		if ok != c.ok || ok && (major != c.major || minor != c.minor) {
			t.Errorf("kernelRelease(%q) = %d, %d, %v; want %d, %d, %v", c.rel, major, minor, ok, c.major, c.minor, c.ok)
		}
	}
	if !syncfsReportsErrors() {
		t.Log("this kernel's syncfs reports no write errors: logs fsync their own files at close")
	}
}
