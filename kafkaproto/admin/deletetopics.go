package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DeleteTopics, key 20: versions 1-6 (flexible from 4; v6 names topics by
// name or id).
const (
	deleteTopicsKey = 20
	deleteTopicsMin = 1
	deleteTopicsMax = 6
)

func deleteTopics(env kapi.Env, ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	ctx, cancel := kapi.AdminContext(ctx, req.TimeoutMillis)
	defer cancel()
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	cl, _ := env.Broker().Cluster()
	for _, rt := range deleteTopicsTargets(req) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		var err error
		switch {
		case rt.Topic != nil:
			if ti, ok := cl.Topic(*rt.Topic); ok {
				t.TopicID = ti.ID
			}
			err = env.Broker().DeleteTopic(ctx, *rt.Topic)
		default:
			ti, ok := cl.TopicByID(rt.TopicID)
			if !ok {
				err = fmt.Errorf("%w: %x", kapi.ErrUnknownTopicID, rt.TopicID)
				break
			}
			t.Topic = &ti.Name
			err = env.Broker().DeleteTopic(ctx, ti.Name)
		}
		t.ErrorCode, t.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// deleteTopicsTargets returns the topics of any version as v6 entries.
func deleteTopicsTargets(req *kmsg.DeleteTopicsRequest) []kmsg.DeleteTopicsRequestTopic {
	if req.Version >= 6 {
		return req.Topics
	}
	out := make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
	for i, name := range req.TopicNames {
		out[i] = kmsg.NewDeleteTopicsRequestTopic()
		out[i].Topic = &name
	}
	return out
}

func deleteTopicsError(req *kmsg.DeleteTopicsRequest, code int16) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, rt := range deleteTopicsTargets(req) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
