package api

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

// topicsResource serves /v1/topics and everything under a topic.
type topicsResource struct{ h *handler }

func (t topicsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", t.list)
	r.Post("/", t.create)
	r.Route("/{topic}", func(r chi.Router) {
		r.Get("/", t.describe)
		r.Delete("/", t.delete)
		r.Patch("/configs", t.alterConfigs)
		r.Post("/elect-leaders", t.electLeaders)
		r.Put("/partitions/{partition}/replicas", t.reassign)
		r.Delete("/partitions/{partition}/replicas", t.cancelReassign)
		rec := recordsResource(t)
		r.Post("/records", rec.produce)
		r.Get("/records/stream", rec.stream)
		r.Get("/partitions/{partition}/records", rec.consume)
	})
	return r
}

// ValidTopicName reports whether name is a legal topic name (Kafka's rules).
func ValidTopicName(name string) error {
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopicName, name)
	}
	if !legalTopicName(name) {
		return fmt.Errorf("%w: %q: 1 to 249 characters of [a-zA-Z0-9._-]", ErrInvalidTopicName, name)
	}
	return nil
}

// legalTopicName: 1 to 249 characters of [a-zA-Z0-9._-].
func legalTopicName(name string) bool {
	if len(name) == 0 || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// topicParam returns the {topic} path parameter, checked.
func topicParam(r *http.Request) (string, error) {
	name := chi.URLParam(r, "topic")
	if un, err := url.PathUnescape(name); err == nil {
		name = un
	}
	if err := ValidTopicName(name); err != nil {
		return "", &FieldError{Field: "path.topic", Err: err, Msg: "invalid topic name"}
	}
	return name, nil
}

// TopicList is GET /v1/topics: one page of topics, and the cursor of the
// next page when there is one.
type TopicList struct {
	Topics     []TopicSummary `json:"topics"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// Topic list pages: the default and largest page sizes. A cluster with up to
// DefaultTopicPage topics is listed in one page, as before pages existed.
const (
	DefaultTopicPage = 1000
	MaxTopicPage     = 10000
)

func (t topicsResource) list(w http.ResponseWriter, r *http.Request) {
	query, err := listQueryParams(r, DefaultTopicPage, MaxTopicPage)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	page, err := t.h.b.ListTopics(r.Context(), query)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	out := TopicList{Topics: page.Topics}
	if out.Topics == nil {
		out.Topics = []TopicSummary{}
	}
	if page.More && len(page.Topics) > 0 {
		out.NextCursor = nextPage(w, r, page.Topics[len(page.Topics)-1].Name)
	}
	t.h.writeJSON(w, r, http.StatusOK, out)
}

// listQueryParams reads the prefix, limit and cursor parameters of a list.
func listQueryParams(r *http.Request, def, most int64) (ListQuery, error) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", def, 1, most)
	if err != nil {
		return ListQuery{}, err
	}
	query := ListQuery{Prefix: q.Get("prefix"), Limit: int(limit)}
	if c := q.Get("cursor"); c != "" {
		if query.After, err = decodeCursor(c); err != nil {
			return ListQuery{}, err
		}
	}
	return query, nil
}

// nextPage returns the cursor of the page after the one ending with last,
// and links to that page in a Link header.
func nextPage(w http.ResponseWriter, r *http.Request, last string) string {
	cursor := encodeCursor(last)
	next := *r.URL
	nq := next.Query()
	nq.Set("cursor", cursor)
	next.RawQuery = nq.Encode()
	w.Header().Set("Link", "<"+next.RequestURI()+`>; rel="next"`)
	return cursor
}

// A list cursor is the last name of the page before, opaque to clients
// (base64url with a version prefix, so its form can change).
const cursorPrefix = "n1:"

func encodeCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + last))
}

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return "", &FieldError{Field: "query.cursor", Err: ErrInvalidRequest, Msg: "not a cursor this server returned"}
	}
	return strings.TrimPrefix(string(b), cursorPrefix), nil
}

// createBody is CreateTopicRequest as sent: absent numbers are the defaults.
type createBody struct {
	Name              string            `json:"name"`
	Partitions        *int32            `json:"partitions"`
	ReplicationFactor *int16            `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

func (t topicsResource) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := decodeJSONBody(r, &body); err != nil {
		t.h.problem(w, r, err)
		return
	}
	if err := ValidTopicName(body.Name); err != nil {
		t.h.problem(w, r, &FieldError{Field: "body.name", Err: err, Msg: "invalid topic name"})
		return
	}
	req := CreateTopicRequest{Name: body.Name, Partitions: -1, ReplicationFactor: -1, Configs: body.Configs}
	if body.Partitions != nil {
		req.Partitions = *body.Partitions
	}
	if body.ReplicationFactor != nil {
		req.ReplicationFactor = *body.ReplicationFactor
	}
	if req.Configs == nil {
		req.Configs = map[string]string{}
	}
	td, err := t.h.b.CreateTopic(r.Context(), req)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/topics/"+url.PathEscape(td.Name))
	t.h.writeJSON(w, r, http.StatusCreated, normalizeTopic(td))
}

func (t topicsResource) describe(w http.ResponseWriter, r *http.Request) {
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	td, err := t.h.b.DescribeTopic(r.Context(), name)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	t.h.writeJSON(w, r, http.StatusOK, normalizeTopic(td))
}

func (t topicsResource) delete(w http.ResponseWriter, r *http.Request) {
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	if err := t.h.b.DeleteTopic(r.Context(), name); err != nil {
		t.h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// AlterConfigsRequest is the body of PATCH /v1/topics/{topic}/configs.
type AlterConfigsRequest struct {
	Configs map[string]*string `json:"configs"`
}

func (t topicsResource) alterConfigs(w http.ResponseWriter, r *http.Request) {
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	var body AlterConfigsRequest
	if err := decodeJSONBody(r, &body); err != nil {
		t.h.problem(w, r, err)
		return
	}
	if body.Configs == nil {
		body.Configs = map[string]*string{}
	}
	td, err := t.h.b.AlterTopicConfigs(r.Context(), name, body.Configs)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	t.h.writeJSON(w, r, http.StatusOK, normalizeTopic(td))
}

// decodeJSONBody decodes the (already read and size-checked) body strictly.
func decodeJSONBody(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", ErrInvalidRequest, err)
	}
	if err := strictUnmarshal(body, v); err != nil {
		return jsonProblem("body", err)
	}
	return nil
}

// normalizeTopic makes nil maps and slices empty so the JSON matches the schema.
func normalizeTopic(td TopicDetail) TopicDetail {
	if td.Configs == nil {
		td.Configs = map[string]string{}
	}
	if td.Partitions == nil {
		td.Partitions = []PartitionDetail{}
	}
	for i := range td.Partitions {
		p := &td.Partitions[i]
		if p.Replicas == nil {
			p.Replicas = []int32{}
		}
		if p.ISR == nil {
			p.ISR = []int32{}
		}
	}
	return td
}

func (t topicsResource) electLeaders(w http.ResponseWriter, r *http.Request) {
	lb, ok := t.h.b.(LeadersBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: leader elections", ErrNotImplemented))
		return
	}
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	td, err := lb.ElectPreferredLeaders(r.Context(), name)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	t.h.writeJSON(w, r, http.StatusOK, normalizeTopic(td))
}

// ReassignRequest is the body of PUT
// /v1/topics/{topic}/partitions/{partition}/replicas.
type ReassignRequest struct {
	Replicas []int32 `json:"replicas"`
}

func (t topicsResource) reassign(w http.ResponseWriter, r *http.Request) {
	t.reassignCall(w, r, http.StatusAccepted, func(rb ReassignBackend, topic string, p int32) (TopicDetail, error) {
		var body ReassignRequest
		if err := decodeJSONBody(r, &body); err != nil {
			return TopicDetail{}, err
		}
		return rb.ReassignPartition(r.Context(), topic, p, body.Replicas)
	})
}

func (t topicsResource) cancelReassign(w http.ResponseWriter, r *http.Request) {
	t.reassignCall(w, r, http.StatusOK, func(rb ReassignBackend, topic string, p int32) (TopicDetail, error) {
		return rb.CancelReassignment(r.Context(), topic, p)
	})
}

// reassignCall checks the backend and the path, runs fn and answers.
func (t topicsResource) reassignCall(w http.ResponseWriter, r *http.Request, status int,
	fn func(rb ReassignBackend, topic string, partition int32) (TopicDetail, error)) {
	rb, ok := t.h.b.(ReassignBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: partition reassignment", ErrNotImplemented))
		return
	}
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	p, err := strconv.ParseInt(chi.URLParam(r, "partition"), 10, 32)
	if err != nil || p < 0 {
		t.h.problem(w, r, &FieldError{Field: "path.partition", Err: ErrInvalidRequest, Msg: "must be an integer from 0"})
		return
	}
	td, err := fn(rb, name, int32(p))
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	t.h.writeJSON(w, r, status, normalizeTopic(td))
}
