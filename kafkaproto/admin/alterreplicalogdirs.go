package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AlterReplicaLogDirs, key 34: versions 0-2 (flexible from 2). A runnel
// broker has one data directory (ClusterAdmin.LogDirs), so the only move
// there is is to where a replica already is: that succeeds and changes
// nothing; another directory is LOG_DIR_NOT_FOUND, a replica this broker
// does not hold REPLICA_NOT_AVAILABLE (as in Kafka).
const (
	alterReplicaLogDirsKey = 34
	alterReplicaLogDirsMin = 0
	alterReplicaLogDirsMax = 2
)

func alterReplicaLogDirs(env kapi.Env, ctx context.Context, req *kmsg.AlterReplicaLogDirsRequest) *kmsg.AlterReplicaLogDirsResponse {
	ca, err := clusterAdmin(env)
	var dirs []kapi.LogDir
	if err == nil {
		dirs, err = ca.LogDirs(ctx)
	}
	if err != nil {
		return alterReplicaLogDirsError(req, kapi.KafkaErr(err))
	}
	held := map[string]map[string]bool{} // dir -> "topic/partition"
	for _, d := range dirs {
		held[d.Path] = map[string]bool{}
		for _, p := range d.Partitions {
			held[d.Path][fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = true
		}
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				p.Partition = idx
				switch in, known := held[rd.Dir]; {
				case !known:
					p.ErrorCode = kapi.KafkaErr(kapi.ErrLogDirNotFound)
				case !in[fmt.Sprintf("%s/%d", rt.Topic, idx)]:
					p.ErrorCode = kapi.KafkaErr(kapi.ErrReplicaNotAvailable)
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}

func alterReplicaLogDirsError(req *kmsg.AlterReplicaLogDirsRequest, code int16) *kmsg.AlterReplicaLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				p.Partition, p.ErrorCode = idx, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}
