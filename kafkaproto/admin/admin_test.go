package admin

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/kafkaproto/kapi/kapitest"
)

// The admin handlers in-process, over kapitest.Env: what they take from
// the environment (endpoints by listener, the admin topic bound, the
// Broker's optional parts). The listener-level sweeps (every key and
// version over a connection) are kafkaproto's tests.

// clusterOnly is a Broker that only has metadata: any other call panics,
// so a test also shows which requests never reach the Broker.
type clusterOnly struct {
	kapi.Broker
	cl *kapi.Cluster
}

func (b clusterOnly) Cluster() (*kapi.Cluster, <-chan struct{}) { return b.cl, nil }

var twoBrokers = &kapi.Cluster{ClusterID: "c", ControllerID: 1, Brokers: []kapi.BrokerInfo{
	{ID: 1, Host: "plain1", Port: 9092, SSLHost: "tls1", SSLPort: 9093},
	{ID: 2, Host: "plain2", Port: 9092}, // no TLS listener
}}

// DescribeCluster advertises each broker on the listener the request came
// through, and leaves out a broker without one.
func TestDescribeClusterEndpointsByListener(t *testing.T) {
	for _, tc := range []struct {
		tls  bool
		want []string
	}{{false, []string{"plain1", "plain2"}}, {true, []string{"tls1"}}} {
		env := &kapitest.Env{B: clusterOnly{cl: twoBrokers}, TLS: tc.tls}
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 1
		resp := kapitest.Serve[*kmsg.DescribeClusterResponse](env, Handlers(), req)
		var got []string
		for _, b := range resp.Brokers {
			got = append(got, b.Host)
		}
		if resp.ClusterID != "c" || len(got) != len(tc.want) || got[0] != tc.want[0] {
			t.Errorf("tls %v: brokers %v, want %v (%+v)", tc.tls, got, tc.want, resp)
		}
	}
}

// A CreateTopics or CreatePartitions request naming more topics than
// MaxAdminTopics is refused whole before the Broker is asked.
func TestAdminTopicsBounded(t *testing.T) {
	env := &kapitest.Env{B: clusterOnly{cl: twoBrokers}, MaxTopics: 2}
	ct := kmsg.NewPtrCreateTopicsRequest()
	cp := kmsg.NewPtrCreatePartitionsRequest()
	for _, name := range []string{"a", "b", "c"} {
		t1 := kmsg.NewCreateTopicsRequestTopic()
		t1.Topic, t1.NumPartitions, t1.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, t1)
		t2 := kmsg.NewCreatePartitionsRequestTopic()
		t2.Topic, t2.Count = name, 2
		cp.Topics = append(cp.Topics, t2)
	}
	ct.SetVersion(createTopicsMax)
	for _, rt := range kapitest.Serve[*kmsg.CreateTopicsResponse](env, Handlers(), ct).Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code || rt.ErrorMessage == nil {
			t.Errorf("CreateTopics %s: code %d message %v", rt.Topic, rt.ErrorCode, rt.ErrorMessage)
		}
	}
	for _, rt := range kapitest.Serve[*kmsg.CreatePartitionsResponse](env, Handlers(), cp).Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("CreatePartitions %s: code %d", rt.Topic, rt.ErrorCode)
		}
	}
}

// Without the Broker's ClusterAdmin the cluster admin APIs answer
// INVALID_REQUEST.
func TestWithoutClusterAdmin(t *testing.T) {
	env := &kapitest.Env{B: clusterOnly{cl: twoBrokers}}
	quorum := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = append(qt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	quorum.Topics = append(quorum.Topics, qt)
	if got := kapitest.Serve[*kmsg.DescribeQuorumResponse](env, Handlers(), quorum); got.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DescribeQuorum: %+v", got)
	}
	logDirs := kmsg.NewPtrDescribeLogDirsRequest()
	logDirs.SetVersion(describeLogDirsMax)
	if got := kapitest.Serve[*kmsg.DescribeLogDirsResponse](env, Handlers(), logDirs); got.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DescribeLogDirs: %+v", got)
	}
}
