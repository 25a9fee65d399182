package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	runnel "github.com/runnel/runnel"
	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/servertest"
)

// The authorization matrix (issue 15): every HTTP operation of openapi.yaml
// and every Kafka API key and version the listener advertises, sent by
// every kind of principal, each answer checked against the expected
// decision. The expectations are the tables below (Kafka's documented
// operation for each API, the same operation for the HTTP endpoint doing
// the same thing); an endpoint or key without a row fails the test.

// mxPerm is a permission a request needs, in Kafka's ACL terms.
type mxPerm struct{ typ, name, op string }

// mxRow: open needs nothing (not even a login); no perms and not open:
// any authenticated principal; peerOnly: refused to every client.
type mxRow struct {
	open, peerOnly bool
	perms          []mxPerm
}

const (
	mxTopic, mxGroup, mxTxn, mxCluster = "mx-t", "mx-g", "mx-x", "kafka-cluster"
)

func topicP(op string) mxPerm   { return mxPerm{"topic", mxTopic, op} }
func groupP(op string) mxPerm   { return mxPerm{"group", mxGroup, op} }
func txnP(op string) mxPerm     { return mxPerm{"transactional_id", mxTxn, op} }
func clusterP(op string) mxPerm { return mxPerm{"cluster", mxCluster, op} }
func needs(ps ...mxPerm) mxRow  { return mxRow{perms: ps} }

var (
	mxOpen     = mxRow{open: true}
	mxPeerOnly = mxRow{peerOnly: true}
	mxAuth     = mxRow{}
)

// kafkaMatrix: what each API key needs (Kafka's authorization table).
var kafkaMatrix = map[int16]mxRow{
	0: needs(topicP("write")), 1: needs(topicP("read")), 2: needs(topicP("describe")), 3: needs(topicP("describe")),
	8: needs(groupP("read"), topicP("read")), 9: needs(groupP("describe"), topicP("describe")),
	10: needs(groupP("describe")), 11: needs(groupP("read")), 12: needs(groupP("read")), 13: needs(groupP("read")),
	14: needs(groupP("read")), 15: needs(groupP("describe")), 16: needs(clusterP("describe")),
	17: mxOpen, 18: mxOpen, 36: mxOpen,
	19: needs(topicP("create")), 20: needs(topicP("delete")), 21: needs(topicP("delete")), 22: mxAuth,
	23: needs(topicP("describe")),
	24: needs(txnP("write"), topicP("write")), 25: needs(txnP("write"), groupP("read")), 26: needs(txnP("write")),
	27: mxPeerOnly, // runnel takes WriteTxnMarkers only from brokers, on the inter-broker port
	28: needs(txnP("write"), groupP("read"), topicP("read")),
	29: needs(clusterP("describe")), 30: needs(clusterP("alter")), 31: needs(clusterP("alter")),
	32: needs(topicP("describe_configs")), 33: needs(topicP("alter_configs")), 34: needs(clusterP("alter")),
	35: needs(clusterP("describe")), 37: needs(topicP("alter")), 42: needs(groupP("delete")), 43: needs(clusterP("alter")),
	44: needs(topicP("alter_configs")), 45: needs(clusterP("alter")), 46: needs(clusterP("describe")),
	47: needs(groupP("delete"), topicP("read")), 48: needs(clusterP("describe_configs")), 49: needs(clusterP("alter_configs")),
	50: needs(clusterP("describe")), 51: needs(clusterP("alter")),
	55: needs(clusterP("describe")), 57: needs(clusterP("alter")), 60: needs(clusterP("describe")),
	61: needs(topicP("read")), 65: needs(txnP("describe")), 66: mxAuth, 74: needs(clusterP("describe_configs")),
	75: needs(topicP("describe")),
}

// httpMatrix: what each HTTP operation needs.
var httpMatrix = map[string]mxRow{
	"GET /v1/cluster": needs(clusterP("describe")), "POST /v1/cluster/controllers": needs(clusterP("alter")),
	"DELETE /v1/cluster/controllers/{id}": needs(clusterP("alter")), "GET /v1/brokers": needs(clusterP("describe")),
	"GET /v1/topics": mxAuth, "POST /v1/topics": needs(clusterP("create")),
	"GET /v1/topics/{topic}": needs(topicP("describe")), "DELETE /v1/topics/{topic}": needs(topicP("delete")),
	"PATCH /v1/topics/{topic}/configs": needs(topicP("alter_configs")), "POST /v1/topics/{topic}/elect-leaders": needs(clusterP("alter")),
	"PUT /v1/topics/{topic}/partitions/{partition}/replicas":    needs(clusterP("alter")),
	"DELETE /v1/topics/{topic}/partitions/{partition}/replicas": needs(clusterP("alter")),
	"POST /v1/topics/{topic}/records":                           needs(topicP("write")),
	"GET /v1/topics/{topic}/partitions/{partition}/records":     needs(topicP("read")),
	"GET /v1/topics/{topic}/records/stream":                     needs(topicP("read")),
	"GET /v1/kafka/api-versions":                                needs(clusterP("describe")), "GET /v1/stats/series": needs(clusterP("describe")),
	"GET /v1/groups": needs(clusterP("describe")), "GET /v1/groups/{group}": needs(groupP("describe")),
	"DELETE /v1/groups/{group}": needs(groupP("delete")), "GET /v1/groups/{group}/offsets": needs(groupP("describe")),
	"POST /v1/groups/{group}/offsets": needs(groupP("read")), "POST /v1/groups/{group}/offsets/reset": needs(groupP("read")),
	"POST /v1/groups/{group}/members": needs(groupP("read")), "DELETE /v1/groups/{group}/members/{member}": needs(groupP("read")),
	"GET /v1/groups/{group}/members/{member}/records":  needs(groupP("read")),
	"POST /v1/groups/{group}/members/{member}/offsets": needs(groupP("read")),
	"GET /livez": mxOpen, "GET /readyz": mxOpen, "GET /openapi.yaml": mxOpen, "GET /docs": mxOpen,
	"GET /metrics":  needs(clusterP("describe")),
	"GET /v1/users": needs(clusterP("describe")), "POST /v1/users": needs(clusterP("alter")), "DELETE /v1/users/{name}": needs(clusterP("alter")),
	"GET /v1/acls": needs(clusterP("describe")), "POST /v1/acls": needs(clusterP("alter")), "DELETE /v1/acls": needs(clusterP("alter")),
	"POST /v1/tokens": mxAuth, "DELETE /v1/tokens/{id}": mxAuth,
	"POST /v1/session": mxAuth, "GET /v1/session": mxAuth, "DELETE /v1/session": mxAuth, // the login: with the principal's own password
	"GET /v1/transactions": needs(clusterP("describe")), // stricter than Kafka's ListTransactions (filtered by describe)
	"GET /v1/quotas":       needs(clusterP("describe_configs")), "PUT /v1/quotas": needs(clusterP("alter_configs")),
}

// mxPrincipal is one column of the matrix.
type mxPrincipal struct {
	name    string // user name; "" anonymous
	granted bool   // its ACLs allow what every row needs
}

var mxPrincipals = []mxPrincipal{
	{"", false},             // anonymous
	{"mx-none", false},      // authenticated, no ACL
	{"mx-literal", true},    // literal allow
	{"mx-prefixed", true},   // prefixed allow
	{"mx-denied", false},    // allow and a deny on the same: deny wins
	{"mx-wronghost", false}, // allow from another host only
	{"mx-super", true},      // --super-users
}

func (p mxPrincipal) expectAllowed(r mxRow) bool {
	switch {
	case r.open:
		return true
	case r.peerOnly:
		return false
	case p.name == "":
		return false
	case len(r.perms) == 0:
		return true
	}
	return p.granted
}

// mxACLs are the ACLs that make each principal what its name says, for
// every permission any row needs.
func mxACLs() []api.ACL {
	seen := map[mxPerm]bool{}
	var out []api.ACL
	add := func(p mxPerm) {
		if seen[p] {
			return
		}
		seen[p] = true
		lit := api.ACL{ResourceType: p.typ, ResourceName: p.name, PatternType: "literal", Host: "*", Operation: p.op, Permission: "allow"}
		with := func(principal string, f func(*api.ACL)) {
			a := lit
			a.Principal = principal
			if f != nil {
				f(&a)
			}
			out = append(out, a)
		}
		with("User:mx-literal", nil)
		with("User:mx-prefixed", func(a *api.ACL) {
			if p.typ != "cluster" { // the cluster resource has one name: literal only (Kafka's rule too)
				a.PatternType, a.ResourceName = "prefixed", p.name[:3]
			}
		})
		with("User:mx-denied", nil)
		with("User:mx-denied", func(a *api.ACL) { a.Permission = "deny" })
		with("User:mx-wronghost", func(a *api.ACL) { a.Host = "10.9.9.9" })
	}
	for _, m := range []map[int16]mxRow{kafkaMatrix} {
		for _, r := range m {
			for _, p := range r.perms {
				add(p)
			}
		}
	}
	for _, r := range httpMatrix {
		for _, p := range r.perms {
			add(p)
		}
	}
	return out
}

func TestAuthorizationMatrix(t *testing.T) {
	const admin = "mx-admin-pw"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required", "--super-users", "User:mx-super",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin)}})
	hc := &http.Client{Timeout: 20 * time.Second}
	adminDo := func(method, path string, body any, want int) []byte {
		t.Helper()
		code, out := mxHTTP(t, hc, n.URL, method, path, body, func(r *http.Request) { r.SetBasicAuth("admin", admin) })
		if code != want {
			t.Fatalf("%s %s as admin: %d %s", method, path, code, out)
		}
		return out
	}
	for _, p := range mxPrincipals[1:] {
		adminDo("POST", "/v1/users", api.UserRequest{Name: p.name, Password: p.name + "-pw", Mechanism: "SCRAM-SHA-512"}, 201)
	}
	adminDo("POST", "/v1/topics", map[string]any{"name": mxTopic, "partitions": 1}, 201)
	acls := mxACLs()
	for _, a := range acls {
		adminDo("POST", "/v1/acls", a, 201)
	}
	mxTopicID = mxLookupTopicID(t, n, admin)
	cases, wrong := 0, 0
	check := func(door, what string, p mxPrincipal, cred string, allowed bool, detail string) {
		t.Helper()
		cases++
		name := p.name
		if name == "" {
			name = "anonymous"
		}
		if want := p.expectAllowed(rowOf(door, what)); allowed != want {
			wrong++
			t.Errorf("%s %s as %s (%s): allowed=%v, want %v: %s", door, what, name, cred, allowed, want, detail)
		}
	}
	mxCheckKafka(t, n, check)
	mxCheckHTTP(t, n, hc, check)
	t.Logf("%d cases (%d ACLs loaded), %d not as expected", cases, len(acls), wrong)
	if cases < 2000 {
		t.Fatalf("only %d cases", cases)
	}
}

func rowOf(door, what string) mxRow {
	if door == "http" {
		return httpMatrix[what]
	}
	var key int16
	fmt.Sscanf(what, "%d", &key)
	return kafkaMatrix[key]
}

type mxCheckFunc func(door, what string, p mxPrincipal, cred string, allowed bool, detail string)

// HTTP door: every operation in openapi.yaml (the router serves exactly
// those: rest.TestRoutesMatchSpec), Basic and Bearer for each user.
func mxCheckHTTP(t *testing.T, n *servertest.Node, hc *http.Client, check mxCheckFunc) {
	spec, err := openapi3.NewLoader().LoadFromData(runnel.OpenAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, item := range spec.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	tokens := map[string]string{}
	for _, p := range mxPrincipals[1:] {
		_, out := mxHTTP(t, hc, n.URL, "POST", "/v1/tokens", nil, func(r *http.Request) { r.SetBasicAuth(p.name, p.name+"-pw") })
		var tok api.NewToken
		if err := json.Unmarshal(out, &tok); err != nil || tok.Token == "" {
			t.Fatalf("token for %s: %s", p.name, out)
		}
		tokens[p.name] = tok.Token
	}
	fill := strings.NewReplacer("{topic}", mxTopic, "{partition}", "0", "{group}", mxGroup, "{member}", "mx-m",
		"{id}", "99", "{name}", "mx-ghost")
	for _, op := range ops {
		if _, ok := httpMatrix[op]; !ok {
			t.Errorf("HTTP %s has no row in httpMatrix", op)
			continue
		}
		method, path, _ := strings.Cut(op, " ")
		path = fill.Replace(path)
		if method == http.MethodDelete && path == "/v1/acls" {
			path += "?principal=User:mx-nobody" // selects nothing: the matrix's ACLs stay
		}
		var body any
		if method != http.MethodGet && method != http.MethodDelete {
			body = map[string]any{}
		}
		for _, p := range mxPrincipals {
			creds := map[string]func(*http.Request){"none": func(*http.Request) {}}
			if p.name != "" {
				pwd, tok := p.name+"-pw", tokens[p.name]
				creds = map[string]func(*http.Request){
					"basic":  func(r *http.Request) { r.SetBasicAuth(p.name, pwd) },
					"bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) },
				}
			}
			for cred, set := range creds {
				body := body
				if op == "POST /v1/session" && p.name != "" { // the login proves the password in its body
					body, set = api.LoginRequest{User: p.name, Password: p.name + "-pw"}, func(*http.Request) {}
					if cred == "bearer" {
						body = api.LoginRequest{Token: tokens[p.name]}
					}
				}
				code, out := mxHTTP(t, hc, n.URL, method, path, body, set)
				check("http", op, p, cred, code != http.StatusUnauthorized && code != http.StatusForbidden, fmt.Sprintf("%d %.200s", code, out))
			}
		}
	}
}

// mxHTTP sends one request and returns the status and (up to 4 KiB of) the
// body: enough for a stream, which is not read to its end.
func mxHTTP(t *testing.T, hc *http.Client, base, method, path string, body any, set func(*http.Request)) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	set(req)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, out
}

// Kafka door: every advertised key and version, over a connection per
// principal and mechanism (PLAIN, SCRAM-SHA-512) kept for every request,
// and, for anonymous, a fresh connection per request.
func mxCheckKafka(t *testing.T, n *servertest.Node, check mxCheckFunc) {
	conns := map[string]net.Conn{}
	login := func(p mxPrincipal, mech string) net.Conn {
		k := p.name + "/" + mech
		if c := conns[k]; c != nil {
			return c
		}
		c := rawDial(t, n.KafkaAddr)
		if err := mxSASL(c, mech, p.name, p.name+"-pw"); err != nil {
			t.Fatalf("%s logs in with %s: %v", p.name, mech, err)
		}
		conns[k] = c
		return c
	}
	for _, v := range kafkaproto.SupportedVersions() {
		row, ok := kafkaMatrix[v.Key]
		if !ok {
			t.Errorf("Kafka API %d %s has no row in kafkaMatrix", v.Key, v.Name)
			continue
		}
		for ver := v.MinVersion; ver <= v.MaxVersion; ver++ {
			what := fmt.Sprintf("%d %s v%d", v.Key, v.Name, ver)
			for _, p := range mxPrincipals {
				mechs := []string{"PLAIN", "SCRAM-SHA-512"}
				if p.name == "" {
					mechs = []string{"none"}
				}
				for _, mech := range mechs {
					var c net.Conn
					if p.name == "" || row.open {
						c = rawDial(t, n.KafkaAddr) // pre-login requests: on a connection that has not logged in
					} else {
						c = login(p, mech)
					}
					resp, err := mxKafka(c, mxRequest(v.Key, ver))
					if err != nil && p.name != "" && !row.open {
						delete(conns, p.name+"/"+mech)
						c.Close()
					}
					allowed, detail := err == nil, fmt.Sprint(err)
					if err == nil {
						codes := mxErrorCodes(reflect.ValueOf(resp), "")
						detail = fmt.Sprint(codes)
						for _, code := range codes {
							if isAuthzCode(code) {
								allowed = false
							}
						}
					}
					check("kafka", what, p, mech, allowed, detail)
				}
			}
		}
	}
}

func isAuthzCode(code int16) bool {
	switch code {
	case kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code,
		kerr.TransactionalIDAuthorizationFailed.Code, kerr.SaslAuthenticationFailed.Code:
		return true
	}
	return false
}

// mxSASL logs c in (SaslHandshake v1, SaslAuthenticate v2).
func mxSASL(c net.Conn, mech, user, pwd string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech
	resp, err := mxKafka(c, hs)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return kerr.ErrorForCode(code)
	}
	step := func(b []byte) ([]byte, error) {
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.Version, a.SASLAuthBytes = 2, b
		resp, err := mxKafka(c, a)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			return nil, kerr.ErrorForCode(r.ErrorCode)
		}
		return r.SASLAuthBytes, nil
	}
	if mech == "PLAIN" {
		_, err := step([]byte("\x00" + user + "\x00" + pwd))
		return err
	}
	sess, first, err := scram.Auth{User: user, Pass: pwd}.AsSha512Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	msg := first
	for {
		in, err := step(msg)
		if err != nil {
			return err
		}
		done, out, err := sess.Challenge(in)
		if err != nil || done {
			return err
		}
		msg = out
	}
}

// mxKafka writes one request and reads its response; an error when the
// server closed the connection instead.
func mxKafka(c net.Conn, req kmsg.Request) (kmsg.Response, error) {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(rawFormatter.AppendRequest(nil, req, 7)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, errors.New("undecodable response: " + err.Error())
	}
	return resp, nil
}

// mxTopicID is mx-t's topic id (Fetch 13+ names topics by id).
var mxTopicID [16]byte

// mxRequest is a request of key and version naming the matrix's resources
// (topic mx-t, group mx-g, transactional id mx-x): every list gets one
// element, every name field its resource.
func mxRequest(key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	mxFill(reflect.ValueOf(req).Elem(), "", 0)
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Acks, r.TimeoutMillis, r.TransactionID = 1, 5000, nil
	case *kmsg.FetchRequest:
		r.ReplicaID, r.ReplicaState.ID, r.MaxBytes = -1, -1, 1<<20
	case *kmsg.ListOffsetsRequest:
		r.ReplicaID = -1
	case *kmsg.OffsetForLeaderEpochRequest:
		r.ReplicaID = -1
	case *kmsg.InitProducerIDRequest:
		r.TransactionalID = nil
	case *kmsg.JoinGroupRequest:
		r.ProtocolType = "consumer"
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorType = 0
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.DescribeACLsRequest:
		// the ACL APIs name the cluster-level change itself; their
		// principals point nowhere (mxFill)
	}
	return req
}

func mxFill(v reflect.Value, field string, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mxFill(v.Field(i), v.Type().Field(i).Name, depth+1)
			}
		}
	case reflect.Slice:
		switch el := v.Type().Elem(); {
		case el.Kind() == reflect.Uint8:
		case el.Kind() == reflect.String:
			if name := mxName(field); name != "" {
				v.Set(reflect.Append(v, reflect.ValueOf(name)))
			}
		case el.Kind() == reflect.Int32 && field == "Partitions":
			v.Set(reflect.Append(v, reflect.ValueOf(int32(0))))
		case el.Kind() == reflect.Struct:
			e := reflect.New(el).Elem()
			mxFill(e, field, depth+1)
			v.Set(reflect.Append(v, e))
		}
	case reflect.String:
		if name := mxName(field); name != "" {
			v.SetString(name)
		}
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.String && (field == "Topic" || field == "TopicName" || field == "Group") {
			s := mxName(field)
			v.Set(reflect.ValueOf(&s))
		}
	case reflect.Array:
		if field == "TopicID" {
			v.Set(reflect.ValueOf(mxTopicID))
		}
	case reflect.Int8:
		if field == "ResourceType" {
			v.SetInt(2) // topic, in both the config and the ACL enums
		}
	}
}

func mxName(field string) string {
	switch field {
	case "Topic", "TopicName", "TopicNames", "ResourceName":
		return mxTopic
	case "Group", "GroupID", "Groups", "CoordinatorKey", "CoordinatorKeys":
		return mxGroup
	case "TransactionalID", "TransactionalIDs":
		return mxTxn
	case "Principal":
		return "User:mx-nobody"
	case "Host":
		return "*"
	}
	return ""
}

// mxErrorCodes collects every non-zero ErrorCode in a response.
func mxErrorCodes(v reflect.Value, field string) []int16 {
	var out []int16
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = mxErrorCodes(v.Elem(), field)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, mxErrorCodes(v.Field(i), v.Type().Field(i).Name)...)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			for i := range v.Len() {
				out = append(out, mxErrorCodes(v.Index(i), field)...)
			}
		}
	case reflect.Int16:
		if field == "ErrorCode" && v.Int() != 0 {
			out = append(out, int16(v.Int()))
		}
	}
	return out
}

// mxLookupTopicID asks Metadata v12 (as the superuser) for mx-t's id.
func mxLookupTopicID(t *testing.T, n *servertest.Node, adminPwd string) [16]byte {
	c := rawDial(t, n.KafkaAddr)
	if err := mxSASL(c, "PLAIN", "admin", adminPwd); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(mxTopic)
	req.Topics = append(req.Topics, rt)
	resp, err := mxKafka(c, req)
	if err != nil || len(resp.(*kmsg.MetadataResponse).Topics) != 1 {
		t.Fatalf("metadata: %v %+v", err, resp)
	}
	return resp.(*kmsg.MetadataResponse).Topics[0].TopicID
}
