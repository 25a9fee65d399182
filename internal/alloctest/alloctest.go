// Package alloctest measures what code allocates, for the tests and fuzz
// targets that bound the decoders of untrusted bytes (STYLE.md 18: an
// input from outside is bounded before it drives an allocation). Only
// tests import it.
//
// The measure is runtime.MemStats.TotalAlloc: cumulative, so no GC is
// needed first, and process-wide, so a test that measures must not run
// other work meanwhile (fuzz workers and t.Parallel tests run in their own
// process or not at once).
package alloctest

import "runtime"

// The allocation bound of a decoder of untrusted bytes: at most Factor
// times its input plus Slack (the decoder's own fixed buffers).
const (
	Factor = 8
	Slack  = 64 << 10
)

// Bytes is what fn allocated, in bytes.
func Bytes(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Limit is the bound for decoding input bytes, plus extra for what the
// caller's contract adds (per-record entries, say).
func Limit(input, extra int) uint64 { return uint64(Factor*input + extra + Slack) }
