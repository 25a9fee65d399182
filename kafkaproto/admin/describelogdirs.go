package admin

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeLogDirs, key 35: versions 0-5 (flexible from 2; total and
// usable bytes from 4; v5's cordoned flag is always false). This broker's data directory and the size and
// offset lag of each replica in it (ClusterAdmin.LogDirs). Null topics:
// every replica; named topics or partitions this broker does not hold are
// left out, as Kafka does.
const (
	describeLogDirsKey = 35
	describeLogDirsMin = 0
	describeLogDirsMax = 5
)

func describeLogDirs(env kapi.Env, ctx context.Context, req *kmsg.DescribeLogDirsRequest) *kmsg.DescribeLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	ca, err := clusterAdmin(env)
	if err == nil {
		err = kapi.CheckAdminTopics(env, len(req.Topics))
	}
	var dirs []kapi.LogDir
	if err == nil {
		dirs, err = ca.LogDirs(ctx)
	}
	if err != nil {
		return describeLogDirsError(req, kapi.KafkaErr(err))
	}
	want := wantedPartitions(req.Topics)
	for _, d := range dirs {
		resp.Dirs = append(resp.Dirs, logDir(d, want))
	}
	return resp
}

// wantedPartitions indexes a request's topics; nil means every partition.
func wantedPartitions(topics []kmsg.DescribeLogDirsRequestTopic) map[string][]int32 {
	if topics == nil {
		return nil
	}
	want := make(map[string][]int32, len(topics))
	for _, t := range topics {
		want[t.Topic] = append(want[t.Topic], t.Partitions...)
	}
	return want
}

func logDir(d kapi.LogDir, want map[string][]int32) kmsg.DescribeLogDirsResponseDir {
	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir, rd.ErrorCode = d.Path, kapi.KafkaErr(d.Err)
	rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.FreeBytes
	for _, p := range d.Partitions { // sorted by topic, then partition
		if want != nil && !slices.Contains(want[p.Topic], p.Partition) {
			continue
		}
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			rd.Topics = append(rd.Topics, t)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size, rp.OffsetLag = p.Partition, p.Size, p.OffsetLag
		t := &rd.Topics[len(rd.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	return rd
}

func describeLogDirsError(req *kmsg.DescribeLogDirsRequest, code int16) *kmsg.DescribeLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	if req.Version < 3 { // no top-level code: a directory carries it
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.ErrorCode = code
		resp.Dirs = append(resp.Dirs, d)
	}
	return resp
}
