package admin

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// CreateTopics, key 19: versions 2-7 (flexible from 5; v5+ responses carry
// the partitions, replication factor and configs of the new topic, v7 its
// id). A replica assignment (with partitions and replication factor -1)
// places the partitions (assignments.go); a topic named twice in one
// request is rejected, and so is a request naming more than
// Options.MaxAdminTopics topics.
const (
	createTopicsKey = 19
	createTopicsMin = 2
	createTopicsMax = 7
)

func createTopics(env kapi.Env, ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	ctx, cancel := kapi.AdminContext(ctx, req.TimeoutMillis)
	defer cancel()
	if err := kapi.CheckAdminTopics(env, len(req.Topics)); err != nil {
		resp := createTopicsError(req, kapi.KafkaErr(err))
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = kapi.ErrMessage(err)
		}
		return resp
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	// The topics are created at the same time (at most createParallel at
	// once): each is its own metadata proposal, and proposals made together
	// share the controller's log appends and syncs. One after the other, a
	// request of 1,000 topics waited for 1,000 syncs in a row (issue 19).
	// Each topic keeps its own answer, in the request's order.
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	slots := make(chan struct{}, createParallel)
	var wg sync.WaitGroup
	for i, rt := range req.Topics {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			resp.Topics[i] = createTopic(env, ctx, req, rt, seen[rt.Topic] > 1)
		}()
	}
	wg.Wait()
	return resp
}

// createParallel bounds the creations of one request in flight: as many
// as one raft append takes (hashicorp/raft's MaxAppendEntries default).
const createParallel = 64

// createTopic creates one topic of a request (twice: named more than once
// in it) and returns its answer.
func createTopic(env kapi.Env, ctx context.Context, req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic, twice bool) kmsg.CreateTopicsResponseTopic {
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic = rt.Topic
	spec, err := topicSpec(rt)
	if err == nil && twice {
		err = fmt.Errorf("%w: topic %q named more than once", kapi.ErrInvalidRequest, rt.Topic)
	}
	if err == nil {
		err = env.Broker().CreateTopic(ctx, spec, req.ValidateOnly)
	}
	if err != nil {
		t.ErrorCode, t.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		t.NumPartitions, t.ReplicationFactor = -1, -1
	} else if req.Version >= 5 {
		describeCreated(env, ctx, &t, spec, req.ValidateOnly)
	}
	return t
}

func topicSpec(rt kmsg.CreateTopicsRequestTopic) (kapi.TopicSpec, error) {
	spec := kapi.TopicSpec{
		Name:              rt.Topic,
		Partitions:        rt.NumPartitions,
		ReplicationFactor: rt.ReplicationFactor,
		Configs:           make(map[string]string, len(rt.Configs)),
	}
	if len(rt.ReplicaAssignment) > 0 {
		as, err := topicAssignments(rt)
		if err != nil {
			return spec, err
		}
		spec.Assignments, spec.Partitions, spec.ReplicationFactor = as, int32(len(as)), int16(len(as[0]))
	}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return spec, fmt.Errorf("%w: config %q has a null value", kapi.ErrInvalidConfig, c.Name)
		}
		spec.Configs[c.Name] = *c.Value
	}
	return spec, nil
}

// describeCreated fills the v5+ fields describing a created (or validated)
// topic.
func describeCreated(env kapi.Env, ctx context.Context, t *kmsg.CreateTopicsResponseTopic, spec kapi.TopicSpec, validateOnly bool) {
	t.NumPartitions, t.ReplicationFactor = spec.Partitions, spec.ReplicationFactor
	if ti, ok := kapi.LookupTopic(env.Broker(), spec.Name); ok && !validateOnly {
		t.TopicID = ti.ID
		t.NumPartitions = int32(len(ti.Partitions))
		if len(ti.Partitions) > 0 {
			t.ReplicationFactor = int16(len(ti.Partitions[0].Replicas))
		}
	}
	if validateOnly {
		return
	}
	entries, err := env.Broker().DescribeConfigs(ctx, kapi.ConfigResource{Type: kapi.ResourceTopic, Name: spec.Name})
	if err != nil {
		t.ConfigErrorCode = kapi.KafkaErr(err)
		return
	}
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.Value, e.ReadOnly, int8(e.Source), e.Sensitive
		t.Configs = append(t.Configs, c)
	}
}

func createTopicsError(req *kmsg.CreateTopicsRequest, code int16) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, code
		t.NumPartitions, t.ReplicationFactor = -1, -1
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
