package broker

import (
	"fmt"
	"testing"
)

// BenchmarkOpenLogsTake is one take of a set holding n partitions, as the
// maintenance and ISR rounds take the logs changed or queued since the
// last (issue 19: after a burst writing to every partition, each round
// took 300,000). B/op is the slice take returns; ns/op includes adding
// them all back.
func BenchmarkOpenLogsTake(b *testing.B) {
	for _, n := range []int{1_000, 300_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			parts := make([]*Partition, n)
			for i := range parts {
				parts[i] = &Partition{index: int32(i), openSlot: -1}
			}
			var s openLogs
			for _, p := range parts { // the set's slots grown once
				s.add(p)
			}
			s.take(func(*Partition) {})
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range parts {
					s.add(p)
				}
				if got := s.take(func(*Partition) {}); len(got) != n {
					b.Fatalf("took %d, want %d", len(got), n)
				}
			}
		})
	}
}
