// Package textline splits the lines of runnel's small text file formats
// (a log's log.state in segments/statefile, a data directory's
// high-watermark checkpoint in server/broker/hwcheckpoint) into fields,
// without allocating: their decoders read untrusted bytes from disk and
// bound what they allocate by their input, so they split no line into a
// slice of fields of its own making. It imports no project package (a
// leaf, deps_test.go). No goroutines, no state: safe for concurrent use.
package textline

import "strings"

// blanks separate fields: spaces, and the tabs and line ends a hand-edited
// file or a line still holding its "\n" (strings.Lines) may have.
const blanks = " \t\r\n"

// Fields splits ln at runs of blanks (spaces, tabs, "\r", "\n") into f and
// returns how many fields it found; ok is false when ln has more than
// len(f), and then f holds the first len(f).
func Fields(ln string, f []string) (n int, ok bool) {
	for {
		ln = strings.TrimLeft(ln, blanks)
		if ln == "" {
			return n, true
		}
		if n == len(f) {
			return n, false
		}
		i := strings.IndexAny(ln, blanks)
		if i < 0 {
			i = len(ln)
		}
		f[n], ln = ln[:i], ln[i:]
		n++
	}
}
