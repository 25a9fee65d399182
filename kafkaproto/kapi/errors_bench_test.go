package kapi

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkErrMessage is the message of the errors a produce of 100,000
// partitions answers most after a broker's failure (issue 19): a sentinel,
// a fixed wrapped sentinel, and a per-partition wait that timed out.
func BenchmarkErrMessage(b *testing.B) {
	for _, bc := range []struct {
		name string
		err  error
	}{
		{"sentinel", ErrRequestTimedOut},
		{"wrapped", fmt.Errorf("%w: the request's timeout ran out before this partition's turn to be appended; nothing was written", ErrRequestTimedOut)},
		{"wait", fmt.Errorf("server: wait for the in-sync replicas of orders-17: %w", context.DeadlineExceeded)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ErrMessage(bc.err) == nil {
					b.Fatal("no message")
				}
			}
		})
	}
}
