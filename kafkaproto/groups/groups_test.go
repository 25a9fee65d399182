package groups

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/kafkaproto/kapi/kapitest"
)

// The group handlers in-process, over kapitest.Env. The every-version
// sweeps over a connection are kafkaproto's tests (groups_test.go there)
// and, against the real coordinator, server's TestGroupAPIsEveryVersion.

// noGroups is a Broker without a GroupCoordinator (or TxnCoordinator).
type noGroups struct {
	kapi.Broker
	cl *kapi.Cluster
}

func (b noGroups) Cluster() (*kapi.Cluster, <-chan struct{}) { return b.cl, nil }

// withGroups coordinates every group on broker 2; its other coordinator
// methods are not called here.
type withGroups struct {
	noGroups
	kapi.GroupCoordinator
}

func (withGroups) GroupCoordinatorID(context.Context, string) (int32, error) { return 2, nil }

var cluster = &kapi.Cluster{Brokers: []kapi.BrokerInfo{
	{ID: 1, Host: "plain1", Port: 9092},
	{ID: 2, Host: "plain2", Port: 9092, SSLHost: "tls2", SSLPort: 9093},
}}

// Without a GroupCoordinator the group APIs answer
// COORDINATOR_NOT_AVAILABLE for each group, and ListGroups an empty list.
func TestWithoutCoordinator(t *testing.T) {
	env := &kapitest.Env{B: noGroups{cl: cluster}}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"a", "b"}
	for _, g := range kapitest.Serve[*kmsg.DeleteGroupsResponse](env, Handlers(), del).Groups {
		if g.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("DeleteGroups %s: code %d", g.Group, g.ErrorCode)
		}
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "a", "m", 1
	if got := kapitest.Serve[*kmsg.HeartbeatResponse](env, Handlers(), hb).ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("Heartbeat: code %d", got)
	}
	list := kapitest.Serve[*kmsg.ListGroupsResponse](env, Handlers(), kmsg.NewPtrListGroupsRequest())
	if list.ErrorCode != 0 || len(list.Groups) != 0 {
		t.Errorf("ListGroups: %+v", list)
	}
}

// FindCoordinator answers the coordinator's endpoint on the request's
// listener; a transactional id without a TxnCoordinator is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (not retriable), an unknown key
// type INVALID_REQUEST.
func TestFindCoordinator(t *testing.T) {
	find := func(env *kapitest.Env, keyType int8) kmsg.FindCoordinatorResponseCoordinator {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(findCoordinatorMax)
		req.CoordinatorType, req.CoordinatorKeys = keyType, []string{"k"}
		return kapitest.Serve[*kmsg.FindCoordinatorResponse](env, Handlers(), req).Coordinators[0]
	}
	for _, tc := range []struct {
		tls  bool
		host string
		port int32
	}{{false, "plain2", 9092}, {true, "tls2", 9093}} {
		c := find(&kapitest.Env{B: withGroups{noGroups: noGroups{cl: cluster}}, TLS: tc.tls}, 0)
		if c.ErrorCode != 0 || c.NodeID != 2 || c.Host != tc.host || c.Port != tc.port {
			t.Errorf("tls %v: %+v", tc.tls, c)
		}
	}
	env := &kapitest.Env{B: withGroups{noGroups: noGroups{cl: cluster}}}
	if c := find(env, 1); c.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional id: %+v", c)
	}
	if c := find(env, 5); c.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("key type 5: %+v", c)
	}
}
