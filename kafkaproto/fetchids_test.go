package kafkaproto

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch v13+ names topics by id (KIP-516): a known id reads its topic and
// is echoed back; an unknown id, or the id of a topic since deleted and
// created again under the same name, is UNKNOWN_TOPIC_ID; a session keeps
// and forgets partitions by id.
func TestFetchByTopicID(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	mustCreate(t, b, "ids", 2)
	if _, err := b.Produce(context.Background(), "ids", 0, testBatch(3, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	fetch := func(v int16, sessionID, epoch int32, id [16]byte, parts []int32, forget ...int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.SessionID, req.SessionEpoch = v, 1<<20, sessionID, epoch
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		if len(forget) > 0 {
			req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{TopicID: id, Partitions: forget}}
		}
		return roundTrip(t, c, req).(*kmsg.FetchResponse)
	}
	for _, v := range []int16{13, fetchMax} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			id := memTopicID(b, "ids")
			r := fetch(v, 0, -1, id, []int32{0})
			if len(r.Topics) != 1 || r.Topics[0].TopicID != id || r.Topics[0].Partitions[0].ErrorCode != 0 ||
				len(r.Topics[0].Partitions[0].RecordBatches) == 0 || r.Topics[0].Partitions[0].HighWatermark != 3 {
				t.Fatalf("fetch by id: %+v", r)
			}
			unknown := [16]byte{0xde, 0xad}
			r = fetch(v, 0, -1, unknown, []int32{0, 1})
			if len(r.Topics) != 1 || r.Topics[0].TopicID != unknown || len(r.Topics[0].Partitions) != 2 ||
				r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code || r.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicID.Code {
				t.Fatalf("unknown id: %+v", r)
			}

			// A session by id: both partitions, then forget partition 1.
			r = fetch(v, 0, 0, id, []int32{0, 1})
			if r.ErrorCode != 0 || r.SessionID == 0 || len(r.Topics[0].Partitions) != 2 {
				t.Fatalf("session start: %+v", r)
			}
			sess := r.SessionID
			if _, err := b.Produce(context.Background(), "ids", 1, testBatch(1, -1, -1), -1); err != nil {
				t.Fatal(err)
			}
			r = fetch(v, sess, 1, id, nil, 0)
			if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 ||
				r.Topics[0].Partitions[0].Partition != 1 || r.Topics[0].TopicID != id {
				t.Fatalf("incremental after forgetting 0: %+v", r)
			}
		})
	}

	// Deleted and created again: the old id is stale.
	old := memTopicID(b, "ids")
	if err := b.DeleteTopic(context.Background(), "ids"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, "ids", 1)
	if memTopicID(b, "ids") == old {
		t.Fatal("the topic created again kept its id")
	}
	r := fetch(fetchMax, 0, -1, old, []int32{0})
	if r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("stale id: %+v", r)
	}
	r = fetch(fetchMax, 0, -1, memTopicID(b, "ids"), []int32{0})
	if r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("new id: %+v", r)
	}
}

// readOnly authorizes reading topic "ids" and nothing else on topics.
type readOnly struct{ *memBroker }

func (readOnly) Authorize(principal, host, resourceType, name, op string) bool {
	return resourceType != "topic" || name == "ids"
}

// With authorization, a Fetch by topic id is authorized on the topic the id
// names (Kafka resolves ids before checking READ): a reader of "ids" reads
// it by id; an id the broker does not know is UNKNOWN_TOPIC_ID, not a denial
// of the whole request; another topic's id is TOPIC_AUTHORIZATION_FAILED.
func TestFetchByTopicIDAuthorized(t *testing.T) {
	b := newMemBroker()
	c := dial(t, startBroker(t, readOnly{b}, Options{RequireAuth: true}))
	roundTrip(t, c, saslHandshakeReq(mechPlain))
	if resp := saslAuth(t, c, 2, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != 0 {
		t.Fatalf("login: %+v", resp)
	}
	mustCreate(t, b, "ids", 1)
	mustCreate(t, b, "secret", 1)
	if _, err := b.Produce(context.Background(), "ids", 0, testBatch(3, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	fetch := func(ids ...[16]byte) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.SessionEpoch = fetchMax, 1<<20, -1
		for _, id := range ids {
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return roundTrip(t, c, req).(*kmsg.FetchResponse)
	}
	id, unknown := memTopicID(b, "ids"), [16]byte{0xde, 0xad}
	r := fetch(id, unknown)
	if len(r.Topics) != 2 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].HighWatermark != 3 ||
		r.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by id as a reader of ids: %+v", r)
	}
	r = fetch(memTopicID(b, "secret"))
	if len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch of another topic by id: %+v", r)
	}
}
