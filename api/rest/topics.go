package rest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
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

// topicParam returns the {topic} path parameter, checked.
func topicParam(r *http.Request) (string, error) {
	name := chi.URLParam(r, "topic")
	if un, err := url.PathUnescape(name); err == nil {
		name = un
	}
	if err := api.ValidTopicName(name); err != nil {
		return "", &api.FieldError{Field: "path.topic", Err: err, Msg: "invalid topic name"}
	}
	return name, nil
}

func (t topicsResource) list(w http.ResponseWriter, r *http.Request) {
	query, err := listQueryParams(r, api.DefaultTopicPage, api.MaxTopicPage)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	page, err := t.h.b.ListTopics(r.Context(), query)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	out := api.TopicList{Topics: page.Topics}
	if out.Topics == nil {
		out.Topics = []api.TopicSummary{}
	}
	if page.More && len(page.Topics) > 0 {
		out.NextCursor = nextPage(w, r, page.Topics[len(page.Topics)-1].Name)
	}
	t.h.writeJSON(w, r, http.StatusOK, out)
}

// listQueryParams reads the prefix, limit and cursor parameters of a list.
func listQueryParams(r *http.Request, def, most int64) (api.ListQuery, error) {
	q := r.URL.Query()
	limit, err := intParam(q, "limit", def, 1, most)
	if err != nil {
		return api.ListQuery{}, err
	}
	query := api.ListQuery{Prefix: q.Get("prefix"), Limit: int(limit)}
	if c := q.Get("cursor"); c != "" {
		if query.After, err = api.DecodeCursor(c); err != nil {
			return api.ListQuery{}, err
		}
	}
	return query, nil
}

// nextPage returns the cursor of the page after the one ending with last,
// and links to that page in a Link header.
func nextPage(w http.ResponseWriter, r *http.Request, last string) string {
	cursor := api.EncodeCursor(last)
	next := *r.URL
	nq := next.Query()
	nq.Set("cursor", cursor)
	next.RawQuery = nq.Encode()
	w.Header().Set("Link", "<"+next.RequestURI()+`>; rel="next"`)
	return cursor
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
	if err := api.ValidTopicName(body.Name); err != nil {
		t.h.problem(w, r, &api.FieldError{Field: "body.name", Err: err, Msg: "invalid topic name"})
		return
	}
	req := api.CreateTopicRequest{Name: body.Name, Partitions: -1, ReplicationFactor: -1, Configs: body.Configs}
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

func (t topicsResource) alterConfigs(w http.ResponseWriter, r *http.Request) {
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	var body api.AlterConfigsRequest
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
		return fmt.Errorf("%w: reading the body: %v", api.ErrInvalidRequest, err)
	}
	return api.DecodeJSON(body, v)
}

// normalizeTopic makes nil maps and slices empty so the JSON matches the schema.
func normalizeTopic(td api.TopicDetail) api.TopicDetail {
	if td.Configs == nil {
		td.Configs = map[string]string{}
	}
	if td.Partitions == nil {
		td.Partitions = []api.PartitionDetail{}
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
	lb, ok := t.h.b.(api.LeadersBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: leader elections", api.ErrNotImplemented))
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

func (t topicsResource) reassign(w http.ResponseWriter, r *http.Request) {
	t.reassignCall(w, r, http.StatusAccepted, func(rb api.ReassignBackend, topic string, p int32) (api.TopicDetail, error) {
		var body api.ReassignRequest
		if err := decodeJSONBody(r, &body); err != nil {
			return api.TopicDetail{}, err
		}
		return rb.ReassignPartition(r.Context(), topic, p, body.Replicas)
	})
}

func (t topicsResource) cancelReassign(w http.ResponseWriter, r *http.Request) {
	t.reassignCall(w, r, http.StatusOK, func(rb api.ReassignBackend, topic string, p int32) (api.TopicDetail, error) {
		return rb.CancelReassignment(r.Context(), topic, p)
	})
}

// reassignCall checks the backend and the path, runs fn and answers.
func (t topicsResource) reassignCall(w http.ResponseWriter, r *http.Request, status int,
	fn func(rb api.ReassignBackend, topic string, partition int32) (api.TopicDetail, error)) {
	rb, ok := t.h.b.(api.ReassignBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: partition reassignment", api.ErrNotImplemented))
		return
	}
	name, err := topicParam(r)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	p, err := strconv.ParseInt(chi.URLParam(r, "partition"), 10, 32)
	if err != nil || p < 0 {
		t.h.problem(w, r, &api.FieldError{Field: "path.partition", Err: api.ErrInvalidRequest, Msg: "must be an integer from 0"})
		return
	}
	td, err := fn(rb, name, int32(p))
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	t.h.writeJSON(w, r, status, normalizeTopic(td))
}
