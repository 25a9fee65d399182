package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// CreatePartitions, key 37: versions 0-3 (flexible from 2). An assignment
// places the new partitions (assignments.go, through PartitionAssigner);
// a request naming more than Options.MaxAdminTopics topics is refused. The count is bounded by
// the broker (its partition limits) before anything is allocated for it.
const (
	createPartitionsKey = 37
	createPartitionsMin = 0
	createPartitionsMax = 3
)

func createPartitions(env kapi.Env, ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	ctx, cancel := kapi.AdminContext(ctx, req.TimeoutMillis)
	defer cancel()
	if err := kapi.CheckAdminTopics(env, len(req.Topics)); err != nil {
		resp := createPartitionsError(req, kapi.KafkaErr(err))
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = kapi.ErrMessage(err)
		}
		return resp
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		var err error
		if rt.Assignment != nil {
			err = createAssignedPartitions(env, ctx, rt, req.ValidateOnly)
		} else {
			err = env.Broker().CreatePartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
		}
		t.ErrorCode, t.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func createPartitionsError(req *kmsg.CreatePartitionsRequest, code int16) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
