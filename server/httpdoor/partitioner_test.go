package httpdoor

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The reference is franz-go's Kafka-compatible key partitioner.
func TestKeyPartitionMatchesKafkaClients(t *testing.T) {
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range []int32{1, 3, 7, 12, 100} {
		for i := 0; i < 500; i++ {
			key := []byte(fmt.Sprintf("key-%d-%s", i, string(make([]byte, i%5))))
			want := ref.Partition(&kgo.Record{Key: key}, int(n))
			if got := keyPartition(key, n); int(got) != want {
				t.Fatalf("key %q over %d partitions: got %d, kafka clients pick %d", key, n, got, want)
			}
		}
	}
}
