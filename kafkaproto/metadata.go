package kafkaproto

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Metadata, key 3: versions 0-13 (flexible from 9; topic ids from 10; a
// top-level error code from 13, KIP-1102, which is 0 unless the request is
// refused as a whole: runnel never asks a client to rebootstrap).
// Missing topics are created only when both the request allows it and
// Options.AutoCreateTopics is set. The answer is streamed, for every topic
// or the named ones (metadatawrite.go).
const (
	metadataKey = 3
	metadataMin = 0
	metadataMax = 13
)

func (s *Server) metadata(ctx context.Context, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp, cl, topics := s.metadataTopics(ctx, req)
	for _, e := range topics {
		if e.info != nil {
			resp.Topics = append(resp.Topics, metadataTopic(ctx, cl, e.info))
		} else {
			resp.Topics = append(resp.Topics, *e.fixed)
		}
	}
	return resp
}

// metadataEntry is one topic of a Metadata answer: a topic of the cluster
// (info), written from the image when the answer is encoded, or an answer
// made whole here (fixed: an unknown or invalid topic, one just created).
type metadataEntry struct {
	info  *TopicInfo
	fixed *kmsg.MetadataResponseTopic
}

// metadataTopics answers req but for its topics array: the response with
// the brokers filled in, the cluster view it was made from, and the topics
// in the order the request named them (every topic of the cluster when it
// named none), after creating the missing ones it may.
func (s *Server) metadataTopics(ctx context.Context, req *kmsg.MetadataRequest) (*kmsg.MetadataResponse, *Cluster, []metadataEntry) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	cl, _ := s.broker.Cluster()
	if missingTopics(cl, req) {
		if cu, ok := s.broker.(MetadataCatchUp); ok && cu.CatchUpMetadata(ctx) {
			cl, _ = s.broker.Cluster()
		}
	}
	var created map[string]bool
	if s.opts.AutoCreateTopics && (req.AllowAutoTopicCreation || req.Version < 4) {
		created = s.autoCreate(ctx, cl, req)
	}
	metadataBrokers(ctx, cl, resp)
	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if allTopics {
		topics := make([]metadataEntry, len(cl.Topics))
		for i := range cl.Topics {
			topics[i].info = &cl.Topics[i]
		}
		return resp, cl, topics
	}
	// Each topic is answered once, however often it is named (by name, by
	// id or both), in the order first named: Kafka reads the names into a
	// set, and answering every copy let a 1 MB request naming a big topic
	// 100,000 times ask for gigabytes.
	topics := make([]metadataEntry, 0, len(req.Topics))
	named := make(map[namedTopic]struct{}, len(req.Topics))
	once := func(k namedTopic) bool {
		if _, dup := named[k]; dup {
			return false
		}
		named[k] = struct{}{}
		return true
	}
	for _, rt := range req.Topics {
		var (
			t  *TopicInfo
			ok bool
		)
		if rt.Topic == nil && rt.TopicID != [16]byte{} {
			if t, ok = cl.TopicByID(rt.TopicID); !ok {
				if !once(namedTopic{id: rt.TopicID}) {
					continue
				}
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
				topics = append(topics, metadataEntry{fixed: &mt})
				continue
			}
		} else if rt.Topic != nil {
			t, ok = cl.Topic(*rt.Topic)
		}
		switch {
		case ok && !once(namedTopic{name: t.Name, known: true}):
			continue
		case !ok && rt.Topic != nil && !once(namedTopic{name: *rt.Topic}):
			continue
		case !ok && rt.Topic == nil && !once(namedTopic{null: true}):
			continue
		}
		if rt.Topic != nil && created[*rt.Topic] {
			// Kafka answers the request that creates a topic with
			// LEADER_NOT_AVAILABLE and no partitions; clients ask again
			// (and delete-then-recreate flows rely on it).
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.LeaderNotAvailable.Code
			topics = append(topics, metadataEntry{fixed: &mt})
			continue
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			if rt.Topic != nil && !kapi.ValidTopicName(*rt.Topic) {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			topics = append(topics, metadataEntry{fixed: &mt})
			continue
		}
		topics = append(topics, metadataEntry{info: t})
	}
	return resp, cl, topics
}

// namedTopic is what a Metadata request names, to answer each once: a
// topic of the cluster (known, by its name however it was named), or an
// unknown name, an unknown id or a null name.
type namedTopic struct {
	name  string
	id    [16]byte
	known bool
	null  bool
}

// metadataBrokers fills in the cluster id, controller and the brokers
// with an endpoint on the connection's listener.
func metadataBrokers(ctx context.Context, cl *Cluster, resp *kmsg.MetadataResponse) {
	resp.ClusterID = &cl.ClusterID
	resp.ControllerID = cl.ControllerID
	for i := range cl.Brokers {
		b := &cl.Brokers[i]
		host, port, ok := endpoint(ctx, b)
		if !ok {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, host, port
		if b.Rack != "" {
			rb.Rack = &b.Rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
}

// missingTopics reports whether req names a topic (by name or id) that cl
// lacks.
func missingTopics(cl *Cluster, req *kmsg.MetadataRequest) bool {
	for _, rt := range req.Topics {
		switch {
		case rt.Topic != nil:
			if _, ok := cl.Topic(*rt.Topic); !ok && kapi.ValidTopicName(*rt.Topic) {
				return true
			}
		case rt.TopicID != [16]byte{}:
			if _, ok := cl.TopicByID(rt.TopicID); !ok {
				return true
			}
		}
	}
	return false
}

// autoCreate creates the requested topics that do not exist and returns the
// names it created (or found created meanwhile).
func (s *Server) autoCreate(ctx context.Context, cl *Cluster, req *kmsg.MetadataRequest) map[string]bool {
	var created map[string]bool
	for _, rt := range req.Topics {
		if rt.Topic == nil || !kapi.ValidTopicName(*rt.Topic) {
			continue
		}
		if _, ok := cl.Topic(*rt.Topic); ok {
			continue
		}
		err := s.broker.CreateTopic(ctx, TopicSpec{Name: *rt.Topic, Partitions: -1, ReplicationFactor: -1}, false)
		if err != nil && !errors.Is(err, ErrTopicExists) {
			s.log.Info("auto-creating topic failed", "topic", *rt.Topic, "err", err)
			continue
		}
		if created == nil {
			created = map[string]bool{}
		}
		created[*rt.Topic] = true
	}
	return created
}

func metadataTopic(ctx context.Context, cl *Cluster, t *TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p.Partition, p.LeaderEpoch
		mp.Leader, mp.ErrorCode = listedLeader(ctx, cl, p.Leader)
		mp.Replicas, mp.ISR, mp.OfflineReplicas = orEmpty(p.Replicas), orEmpty(p.ISR), orEmpty(p.Offline)
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// listedLeader is the leader a Metadata-style answer names, and the
// partition's error code. Kafka names only a leader it lists among the
// brokers (alive, with an endpoint on the connection's listener); a
// partition led by a fenced broker (for the moment between its fencing and
// the controller moving its leadership) or by none is LEADER_NOT_AVAILABLE
// with leader -1, one led by a broker without this listener
// LISTENER_NOT_FOUND. A client given a leader it has no address for could
// not reach it.
func listedLeader(ctx context.Context, cl *Cluster, leader int32) (int32, int16) {
	if leader < 0 {
		return -1, kerr.LeaderNotAvailable.Code
	}
	b, ok := cl.Broker(leader)
	if !ok {
		return -1, kerr.LeaderNotAvailable.Code
	}
	if _, _, ok := endpoint(ctx, b); !ok {
		return -1, kerr.ListenerNotFound.Code
	}
	return leader, 0
}

func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func metadataError(req *kmsg.MetadataRequest, code int16) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, code
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}
