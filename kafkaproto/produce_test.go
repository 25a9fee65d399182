package kafkaproto

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceResponseSize: produceResponseSize is the length kmsg encodes,
// at every version, with and without error messages, record errors,
// current leaders (v10+) and node endpoints.
func TestProduceResponseSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	str := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := strings.Repeat("x", rng.IntN(200))
		return &s
	}
	for v := int16(0); v <= kmsg.NewPtrProduceResponse().MaxVersion(); v++ {
		for round := range 20 {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version, resp.ThrottleMillis = v, 7
			for ti := range rng.IntN(4) {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = fmt.Sprintf("topic-%d-%s", ti, strings.Repeat("t", rng.IntN(150)))
				rt.TopicID = [16]byte{byte(ti), 1}
				for pi := range rng.IntN(300) {
					p := kmsg.NewProduceResponseTopicPartition()
					p.Partition, p.BaseOffset, p.LogStartOffset = int32(pi), rng.Int64(), 3
					if rng.IntN(4) == 0 {
						p.ErrorCode, p.ErrorMessage = 6, str()
						p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32N(5), rng.Int32N(3)-1
					}
					for k := range rng.IntN(2) * rng.IntN(4) {
						p.ErrorRecords = append(p.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: int32(k), ErrorMessage: str()})
					}
					rt.Partitions = append(rt.Partitions, p)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			for i := range rng.IntN(3) {
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: int32(i),
					Host: strings.Repeat("h", rng.IntN(140)), Port: 9092, Rack: str()})
			}
			if got, want := produceResponseSize(resp), len(resp.AppendTo(nil)); got != want {
				t.Fatalf("v%d round %d: size %d, kmsg encodes %d bytes", v, round, got, want)
			}
		}
	}
}
