package raftfsm

import (
	"fmt"
	"testing"
)

// BenchmarkPlaceReplicas places one 3-replica partition in a cluster of
// 100,000 partitions over 3 brokers: "scan" with an image the FSM did not
// build (placement counts every partition, as it did for every create before
// the FSM kept counts), "counted" with the FSM's counts. The ratio is what a
// topic creation saves at that size.
func BenchmarkPlaceReplicas(b *testing.B) {
	img := emptyImage()
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &Broker{ID: id, State: BrokerAlive}
	}
	for i := 0; i < 1000; i++ {
		t := &Topic{Name: fmt.Sprintf("t%d", i)}
		for p := 0; p < 100; p++ {
			reps := []int32{int32(p%3 + 1), int32((p+1)%3 + 1), int32((p+2)%3 + 1)}
			t.Partitions = append(t.Partitions, Partition{Leader: reps[0], Replicas: reps, ISR: reps})
		}
		img.Topics = img.Topics.With(t)
	}
	counted := *img
	counted.load = scanLoad(img)
	for name, im := range map[string]*Image{"scan": img, "counted": &counted} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := PlaceReplicas(im, 1, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
