package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclBroker is a memBroker keeping ACLs in memory.
type aclBroker struct {
	*memBroker
	mu   sync.Mutex
	acls []ACL
}

func match(f, a ACL) bool {
	eq := func(w, g string) bool { return w == "" || w == g }
	return eq(f.ResourceType, a.ResourceType) && eq(f.ResourceName, a.ResourceName) && eq(f.PatternType, a.PatternType) &&
		eq(f.Principal, a.Principal) && eq(f.Host, a.Host) && eq(f.Operation, a.Operation) && eq(f.Permission, a.Permission)
}

func (b *aclBroker) CreateACLs(_ context.Context, acls []ACL) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acls = append(b.acls, acls...)
	return nil
}

func (b *aclBroker) DescribeACLs(_ context.Context, f ACL) ([]ACL, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ACL
	for _, a := range b.acls {
		if match(f, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (b *aclBroker) DeleteACLs(_ context.Context, f ACL) ([]ACL, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var kept, out []ACL
	for _, a := range b.acls {
		if match(f, a) {
			out = append(out, a)
		} else {
			kept = append(kept, a)
		}
	}
	b.acls = kept
	return out, nil
}

func startBroker(t *testing.T, b Broker, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewServer(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestACLAPIs creates, describes and deletes an ACL with every version of
// CreateAcls, DescribeAcls and DeleteAcls; without an ACLAdmin they answer
// SECURITY_DISABLED.
func TestACLAPIs(t *testing.T) {
	c := dial(t, startBroker(t, &aclBroker{memBroker: newMemBroker()}, Options{}))
	for v := int16(0); v <= 3; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			topic := fmt.Sprintf("t-%d", v)
			cr := kmsg.NewPtrCreateACLsRequest()
			cr.Version = v
			cc := kmsg.NewCreateACLsRequestCreation()
			cc.ResourceType, cc.ResourceName, cc.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
			cc.Principal, cc.Host, cc.Operation, cc.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			bad := cc
			bad.Operation = kmsg.ACLOperationAny
			cr.Creations = []kmsg.CreateACLsRequestCreation{cc, bad}
			res := roundTrip(t, c, cr).(*kmsg.CreateACLsResponse)
			if len(res.Results) != 2 || res.Results[0].ErrorCode != 0 || res.Results[1].ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("create: %+v", res)
			}
			dr := kmsg.NewPtrDescribeACLsRequest()
			dr.Version = v
			dr.ResourceType, dr.ResourceName, dr.ResourcePatternType = kmsg.ACLResourceTypeAny, &topic, kmsg.ACLResourcePatternTypeAny
			dr.Operation, dr.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			desc := roundTrip(t, c, dr).(*kmsg.DescribeACLsResponse)
			if desc.ErrorCode != 0 || len(desc.Resources) != 1 || len(desc.Resources[0].ACLs) != 1 ||
				desc.Resources[0].ACLs[0].Operation != kmsg.ACLOperationRead || desc.Resources[0].ResourceName != topic {
				t.Fatalf("describe: %+v", desc)
			}
			del := kmsg.NewPtrDeleteACLsRequest()
			del.Version = v
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, &topic, kmsg.ACLResourcePatternTypeAny
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			del.Filters = []kmsg.DeleteACLsRequestFilter{f}
			dres := roundTrip(t, c, del).(*kmsg.DeleteACLsResponse)
			if len(dres.Results) != 1 || len(dres.Results[0].MatchingACLs) != 1 {
				t.Fatalf("delete: %+v", dres)
			}
			if desc := roundTrip(t, c, dr).(*kmsg.DescribeACLsResponse); len(desc.Resources) != 0 {
				t.Fatalf("describe after delete: %+v", desc)
			}
		})
	}
	plain := dial(t, startBroker(t, newMemBroker(), Options{}))
	dr := kmsg.NewPtrDescribeACLsRequest()
	dr.Version, dr.ResourceType, dr.ResourcePatternType = 1, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dr.Operation, dr.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp := roundTrip(t, plain, dr).(*kmsg.DescribeACLsResponse); resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("without ACLAdmin: %+v", resp)
	}
}

// denyCreate authorizes everything but create.
type denyCreate struct{ *memBroker }

func (denyCreate) Authorize(principal, host, resourceType, name, op string) bool {
	return op != "create"
}

// With RequireAuth, Metadata's auto-creation needs create permission: a
// principal without it gets UNKNOWN_TOPIC_OR_PARTITION, not a new topic.
func TestMetadataAutoCreateNeedsCreate(t *testing.T) {
	b := newMemBroker()
	c := dial(t, startBroker(t, denyCreate{b}, Options{RequireAuth: true, AutoCreateTopics: true}))
	roundTrip(t, c, saslHandshakeReq(mechPlain))
	if resp := saslAuth(t, c, 2, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != 0 {
		t.Fatalf("login: %+v", resp)
	}
	r := kmsg.NewPtrMetadataRequest()
	r.Version, r.AllowAutoTopicCreation = 9, true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("autocreated")
	r.Topics = append(r.Topics, mt)
	resp := roundTrip(t, c, r).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata %+v", resp.Topics)
	}
}

// Metadata auto-creation answers like Kafka: the request that creates a
// topic gets LEADER_NOT_AVAILABLE for it (no partitions yet), the next one
// the topic with its partitions.
func TestMetadataAutoCreateAnswersLeaderNotAvailable(t *testing.T) {
	b := newMemBroker()
	c := dial(t, startBroker(t, b, Options{AutoCreateTopics: true}))
	ask := func() kmsg.MetadataResponseTopic {
		r := kmsg.NewPtrMetadataRequest()
		r.Version, r.AllowAutoTopicCreation = 12, true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("made-on-demand")
		r.Topics = append(r.Topics, mt)
		resp := roundTrip(t, c, r).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("metadata %+v", resp.Topics)
		}
		return resp.Topics[0]
	}
	if first := ask(); first.ErrorCode != kerr.LeaderNotAvailable.Code || len(first.Partitions) != 0 {
		t.Fatalf("the creating request: error %d, %d partitions; want LEADER_NOT_AVAILABLE and none", first.ErrorCode, len(first.Partitions))
	}
	if second := ask(); second.ErrorCode != 0 || len(second.Partitions) == 0 {
		t.Fatalf("the next request: error %d, %d partitions; want the topic", second.ErrorCode, len(second.Partitions))
	}
}
