package kafkaproto

import (
	"context"
	"encoding/hex"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic ids in Fetch v13+ (KIP-516): the request names each topic (and
// each forgotten topic) by its id only. resolveFetchTopicIDs fills in the
// names before anything else reads the request, so sessions and reads stay
// keyed by name; the id travels along in fetchTarget.topicID and back in
// the response. An id this broker does not know, even after catching up
// with the controller, gets a name no topic can have (unknownIDTopic), so
// its partitions stay distinct in a session and fetchOnce answers them
// UNKNOWN_TOPIC_ID. A name whose topic now has another id (deleted and
// created again) is UNKNOWN_TOPIC_ID too: the client's id is stale.

// unknownIDTopic is the placeholder name of an unknown topic id: a NUL is
// not allowed in topic names.
func unknownIDTopic(id [16]byte) string { return "\x00" + hex.EncodeToString(id[:]) }

// isUnknownIDTopic reports whether name stands for an id no topic has (a
// real topic name never starts with a NUL byte).
func isUnknownIDTopic(name string) bool { return strings.HasPrefix(name, "\x00") }

// resolveFetchTopicIDs sets the Topic of every id-named topic in req.
func (s *Server) resolveFetchTopicIDs(ctx context.Context, req *kmsg.FetchRequest) {
	cl, _ := s.broker.Cluster()
	for i := range req.Topics {
		if _, ok := cl.TopicByID(req.Topics[i].TopicID); !ok {
			if cu, ok := s.broker.(MetadataCatchUp); ok && cu.CatchUpMetadata(ctx) {
				cl, _ = s.broker.Cluster()
			}
			break
		}
	}
	name := func(id [16]byte) string {
		if t, ok := cl.TopicByID(id); ok {
			return t.Name
		}
		return unknownIDTopic(id)
	}
	for i := range req.Topics {
		req.Topics[i].Topic = name(req.Topics[i].TopicID)
	}
	for i := range req.ForgottenTopics {
		req.ForgottenTopics[i].Topic = name(req.ForgottenTopics[i].TopicID)
	}
}

// topicHasID reports whether cl holds topic name with id.
func topicHasID(cl *Cluster, name string, id [16]byte) bool {
	t, ok := cl.Topic(name)
	return ok && t.ID == id
}
