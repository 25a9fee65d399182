package kafkaproto

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaSweepKeys are covered by TestClientQuotaAPIs.
var quotaSweepKeys = []int16{int16(kmsg.DescribeClientQuotas), int16(kmsg.AlterClientQuotas)}

// quotaBroker keeps one value per user in memory and throttles every
// produce request by throttle.
type quotaBroker struct {
	*memBroker
	throttle time.Duration
	mu       sync.Mutex
	values   map[string]float64 // "user/key"
	charged  int                // produce bytes charged
}

func (b *quotaBroker) DescribeClientQuotas(_ context.Context, fs []QuotaFilter, _ bool) ([]ClientQuota, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ClientQuota
	for _, user := range []string{"alice"} {
		if len(fs) == 1 && fs[0].Match == 0 && fs[0].Name != user {
			continue
		}
		vals := map[string]float64{}
		for _, k := range []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"} {
			if v, ok := b.values[user+"/"+k]; ok {
				vals[k] = v
			}
		}
		if len(vals) > 0 {
			out = append(out, ClientQuota{Entity: []QuotaEntityPart{{Type: "user", Name: &user}}, Values: vals})
		}
	}
	return out, nil
}

func (b *quotaBroker) AlterClientQuota(_ context.Context, e []QuotaEntityPart, set map[string]float64, remove []string, validateOnly bool) error {
	if len(e) != 1 || e[0].Type != "user" || e[0].Name == nil {
		return fmt.Errorf("%w: only named users here", ErrInvalidRequest)
	}
	if validateOnly {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, v := range set {
		b.values[*e[0].Name+"/"+k] = v
	}
	for _, k := range remove {
		delete(b.values, *e[0].Name+"/"+k)
	}
	return nil
}

func (b *quotaBroker) ChargeQuota(_, _ string, produced, _ int, _ time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charged += produced
	if produced > 0 {
		return b.throttle
	}
	return 0
}

// TestClientQuotaAPIs alters and describes a quota with every version of
// AlterClientQuotas and DescribeClientQuotas; an entity the broker refuses
// gets INVALID_REQUEST in its own entry.
func TestClientQuotaAPIs(t *testing.T) {
	c := dial(t, startBroker(t, &quotaBroker{memBroker: newMemBroker(), values: map[string]float64{}}, Options{}))
	for v := int16(0); v <= 1; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			ar := kmsg.NewPtrAlterClientQuotasRequest()
			ar.Version = v
			good := kmsg.NewAlterClientQuotasRequestEntry()
			ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ent.Type, ent.Name = "user", kmsg.StringPtr("alice")
			op := kmsg.NewAlterClientQuotasRequestEntryOp()
			op.Key, op.Value = "producer_byte_rate", float64(1000*(v+1))
			good.Entity, good.Ops = []kmsg.AlterClientQuotasRequestEntryEntity{ent}, []kmsg.AlterClientQuotasRequestEntryOp{op}
			bad := good
			bad.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: kmsg.StringPtr("1.2.3.4")}}
			ar.Entries = []kmsg.AlterClientQuotasRequestEntry{good, bad}
			res := roundTrip(t, c, ar).(*kmsg.AlterClientQuotasResponse)
			if len(res.Entries) != 2 || res.Entries[0].ErrorCode != 0 || res.Entries[1].ErrorCode != kerr.InvalidRequest.Code ||
				*res.Entries[1].Entity[0].Name != "1.2.3.4" {
				t.Fatalf("alter: %+v", res)
			}
			dr := kmsg.NewPtrDescribeClientQuotasRequest()
			dr.Version = v
			comp := kmsg.NewDescribeClientQuotasRequestComponent()
			comp.EntityType, comp.MatchType, comp.Match = "user", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("alice")
			dr.Components = []kmsg.DescribeClientQuotasRequestComponent{comp}
			desc := roundTrip(t, c, dr).(*kmsg.DescribeClientQuotasResponse)
			if desc.ErrorCode != 0 || len(desc.Entries) != 1 || desc.Entries[0].Values[0].Value != float64(1000*(v+1)) {
				t.Fatalf("describe: %+v", desc)
			}
			comp.MatchType, comp.Match = kmsg.QuotasMatchTypeExact, nil
			dr.Components = []kmsg.DescribeClientQuotasRequestComponent{comp}
			if desc := roundTrip(t, c, dr).(*kmsg.DescribeClientQuotasResponse); desc.ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("exact match without a name: %+v", desc)
			}
		})
	}
	plain := dial(t, startBroker(t, newMemBroker(), Options{}))
	if resp := roundTrip(t, plain, kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("without QuotaAdmin: %+v", resp)
	}
}

// A throttled produce answers throttle_time_ms and the connection's next
// request is not read before the throttle ends (KIP-219); requests that
// are not charged (ApiVersions) are not throttled.
func TestQuotaThrottleMutesConnection(t *testing.T) {
	b := &quotaBroker{memBroker: newMemBroker(), values: map[string]float64{}, throttle: 300 * time.Millisecond}
	mustCreate(t, b.memBroker, "q", 1)
	c := dial(t, startBroker(t, b, Options{}))
	if r := roundTrip(t, c, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ThrottleMillis != 0 {
		t.Fatalf("ApiVersions throttled %d ms", r.ThrottleMillis)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 9, 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "q"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = testBatch(1, -1, -1)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	resp := roundTrip(t, c, pr).(*kmsg.ProduceResponse)
	if resp.ThrottleMillis < 300 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: throttle %d ms, %+v", resp.ThrottleMillis, resp.Topics[0].Partitions[0])
	}
	start := time.Now()
	roundTrip(t, c, kmsg.NewPtrApiVersionsRequest())
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("the next request was answered after %v, within the 300 ms throttle", waited)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.charged == 0 {
		t.Fatal("produce bytes not charged")
	}
}
