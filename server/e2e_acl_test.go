package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// One authorizer, both doors: the ACLs alice is given over HTTP (and the
// CLI) let her write and read "orders" and use group "g1" from franz-go
// and over HTTP; "secret" is refused on both doors and hidden from her
// topic lists; bob, with no ACL, may do nothing; a deny wins; the
// bootstrap superuser needs no ACL.
func TestACLsBothDoors(t *testing.T) {
	const admin = "admin-pw-acl"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin)}})
	c := newAPIClient(t, n)
	must := func(resp *http.Response, body []byte, want int) {
		t.Helper()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
		}
	}
	as := func(user, pwd, method, path string, body any) (*http.Response, []byte) {
		return authDo(t, c, method, path, user, pwd, body)
	}
	for _, u := range []string{"alice", "bob"} {
		resp, body := as("admin", admin, http.MethodPost, "/v1/users", api.UserRequest{Name: u, Password: u + "-pw", Mechanism: "SCRAM-SHA-512"})
		must(resp, body, http.StatusCreated)
	}
	for _, topic := range []string{"orders", "secret"} {
		resp, body := as("admin", admin, http.MethodPost, "/v1/topics", map[string]any{"name": topic, "partitions": 1})
		must(resp, body, http.StatusCreated)
	}
	for _, a := range []api.ACL{
		{ResourceType: "topic", ResourceName: "orders", Principal: "User:alice", Operation: "write", Permission: "allow"},
		{ResourceType: "topic", ResourceName: "ord", PatternType: "prefixed", Principal: "User:alice", Operation: "read", Permission: "allow"},
		{ResourceType: "group", ResourceName: "g1", Principal: "User:alice", Operation: "read", Permission: "allow"},
	} {
		resp, body := as("admin", admin, http.MethodPost, "/v1/acls", a)
		must(resp, body, http.StatusCreated)
	}
	resp, body := as("admin", admin, http.MethodPost, "/v1/acls", map[string]any{"resource_type": "broker", "resource_name": "x",
		"principal": "User:alice", "operation": "read", "permission": "allow"})
	must(resp, body, http.StatusBadRequest)
	// The CLI adds one more (describe on the cluster, for group listing).
	out, err := exec.Command(servertest.Binary(t), "--server", n.URL, "--user", "admin", "--password-file", passwordFile(t, admin),
		"acl", "create", "--principal", "User:alice", "--operation", "describe", "--resource-type", "cluster", "--resource-name", "kafka-cluster").CombinedOutput()
	if err != nil {
		t.Fatalf("runnel acl create: %v\n%s", err, out)
	}

	// HTTP door.
	produce := map[string]any{"records": []map[string]any{{"value": "hi"}}}
	resp, body = as("alice", "alice-pw", http.MethodPost, "/v1/topics/orders/records", produce)
	must(resp, body, http.StatusOK)
	resp, body = as("alice", "alice-pw", http.MethodGet, "/v1/topics/orders/partitions/0/records", nil)
	must(resp, body, http.StatusOK)
	resp, body = as("alice", "alice-pw", http.MethodPost, "/v1/topics/secret/records", produce)
	must(resp, body, http.StatusForbidden)
	var p problem
	_ = json.Unmarshal(body, &p)
	if !strings.HasSuffix(p.Type, ":forbidden") || !strings.Contains(p.Detail, `write topic "secret"`) {
		t.Fatalf("403 problem %+v", p)
	}
	resp, body = as("bob", "bob-pw", http.MethodPost, "/v1/topics/orders/records", produce)
	must(resp, body, http.StatusForbidden)
	resp, body = as("alice", "alice-pw", http.MethodDelete, "/v1/topics/orders", nil)
	must(resp, body, http.StatusForbidden)
	var list api.TopicList
	resp, body = as("alice", "alice-pw", http.MethodGet, "/v1/topics", nil)
	must(resp, body, http.StatusOK)
	_ = json.Unmarshal(body, &list)
	if len(list.Topics) != 1 || list.Topics[0].Name != "orders" {
		t.Fatalf("alice's topic list: %s", body)
	}

	// Kafka door.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr), kgo.RequestRetries(1),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := alice()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("kafka")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to orders: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range meta.Topics {
		if tp.Topic != nil && *tp.Topic == "secret" {
			t.Fatal("metadata shows alice the topic secret")
		}
	}
	consumer := alice(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 2 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consumes orders in g1: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit in g1: %v", err)
	}
	other := alice(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g2"))
	if err := other.PollFetches(ctx).Err0(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice in group g2: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	bob, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RequestRetries(1), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces: %v", err)
	}

	// A deny wins over the allow, on both doors.
	resp, body = as("admin", admin, http.MethodPost, "/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "orders",
		Principal: "User:*", Operation: "write", Permission: "deny"})
	must(resp, body, http.StatusCreated)
	resp, body = as("alice", "alice-pw", http.MethodPost, "/v1/topics/orders/records", produce)
	must(resp, body, http.StatusForbidden)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("denied")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces after the deny: %v", err)
	}
	// Listed and deleted again.
	var acls api.ACLList
	resp, body = as("admin", admin, http.MethodGet, "/v1/acls?principal=User:alice", nil)
	must(resp, body, http.StatusOK)
	if _ = json.Unmarshal(body, &acls); len(acls.ACLs) != 4 {
		t.Fatalf("alice's ACLs: %s", body)
	}
	resp, body = as("admin", admin, http.MethodDelete, "/v1/acls?permission=deny", nil)
	must(resp, body, http.StatusOK)
	if _ = json.Unmarshal(body, &acls); len(acls.ACLs) != 1 {
		t.Fatalf("deleted: %s", body)
	}
	resp, body = as("alice", "alice-pw", http.MethodPost, "/v1/topics/orders/records", produce)
	must(resp, body, http.StatusOK)

	// Kafka's ACL APIs: the superuser creates, describes and deletes; alice may not.
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.SASL(scram.Auth{User: "admin", Pass: admin}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	create := kmsg.NewPtrCreateACLsRequest()
	cc := kmsg.NewCreateACLsRequestCreation()
	cc.ResourceType, cc.ResourceName, cc.ResourcePatternType = kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLResourcePatternTypeLiteral
	cc.Principal, cc.Host, cc.Operation, cc.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cc)
	if res, err := create.RequestWith(ctx, cl); err != nil || res.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice creates an ACL: %v %+v", err, res)
	}
	if res, err := create.RequestWith(ctx, adminCl); err != nil || res.Results[0].ErrorCode != 0 {
		t.Fatalf("admin creates an ACL: %v %+v", err, res)
	}
	resp, body = as("admin", admin, http.MethodGet, "/v1/acls?principal=User:bob", nil)
	must(resp, body, http.StatusOK)
	if !strings.Contains(string(body), `"resource_name":"secret"`) {
		t.Fatalf("the ACL made over Kafka is not listed over HTTP: %s", body)
	}
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Principal = kmsg.StringPtr("User:bob")
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if res, err := describe.RequestWith(ctx, adminCl); err != nil || len(res.Resources) != 1 {
		t.Fatalf("describe: %v %+v", err, res)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Principal = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.StringPtr("User:bob")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	if res, err := del.RequestWith(ctx, adminCl); err != nil || len(res.Results) != 1 || len(res.Results[0].MatchingACLs) != 1 {
		t.Fatalf("delete: %v %+v", err, res)
	}
}
