package rest

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

// clusterResource serves /v1/cluster.
type clusterResource struct{ h *handler }

func (c clusterResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", c.get)
	r.Post("/controllers", c.addController)
	r.Delete("/controllers/{id}", c.removeController)
	return r
}

func (c clusterResource) controllers(w http.ResponseWriter, r *http.Request) (api.ControllersBackend, bool) {
	cb, ok := c.h.b.(api.ControllersBackend)
	if !ok {
		c.h.problem(w, r, fmt.Errorf("%w: quorum changes", api.ErrNotImplemented))
	}
	return cb, ok
}

func (c clusterResource) addController(w http.ResponseWriter, r *http.Request) {
	cb, ok := c.controllers(w, r)
	if !ok {
		return
	}
	var req api.ControllerChange
	if err := decodeJSONBody(r, &req); err != nil {
		c.h.problem(w, r, err)
		return
	}
	c.writeCluster(w, r)(cb.AddController(r.Context(), req))
}

func (c clusterResource) removeController(w http.ResponseWriter, r *http.Request) {
	cb, ok := c.controllers(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 32)
	if err != nil {
		c.h.problem(w, r, &api.FieldError{Field: "path.id", Err: api.ErrInvalidRequest, Msg: "not a controller id"})
		return
	}
	c.writeCluster(w, r)(cb.RemoveController(r.Context(), int32(id)))
}

func (c clusterResource) writeCluster(w http.ResponseWriter, r *http.Request) func(api.Cluster, error) {
	return func(cl api.Cluster, err error) {
		if err != nil {
			c.h.problem(w, r, err)
			return
		}
		if cl.Controllers == nil {
			cl.Controllers = []api.Controller{}
		}
		cl.Brokers = nonNilBrokers(cl.Brokers)
		c.h.writeJSON(w, r, http.StatusOK, cl)
	}
}

func (c clusterResource) get(w http.ResponseWriter, r *http.Request) {
	c.writeCluster(w, r)(c.h.b.Cluster(r.Context()))
}

// brokersResource serves /v1/brokers.
type brokersResource struct{ h *handler }

func (b brokersResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", b.list)
	return r
}

func (b brokersResource) list(w http.ResponseWriter, r *http.Request) {
	bs, err := b.h.b.Brokers(r.Context())
	if err != nil {
		b.h.problem(w, r, err)
		return
	}
	b.h.writeJSON(w, r, http.StatusOK, api.BrokerList{Brokers: nonNilBrokers(bs)})
}

func nonNilBrokers(bs []api.Broker) []api.Broker {
	if bs == nil {
		return []api.Broker{}
	}
	return bs
}

// kafkaResource serves /v1/kafka (KafkaAPIVersionsBackend).
type kafkaResource struct{ h *handler }

func (k kafkaResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/api-versions", k.apiVersions)
	return r
}

func (k kafkaResource) apiVersions(w http.ResponseWriter, r *http.Request) {
	kb, ok := k.h.b.(api.KafkaAPIVersionsBackend)
	if !ok {
		k.h.problem(w, r, fmt.Errorf("%w: no Kafka listener", api.ErrNotImplemented))
		return
	}
	vs, err := kb.KafkaAPIVersions(r.Context())
	if err != nil {
		k.h.problem(w, r, err)
		return
	}
	if vs == nil {
		vs = []api.KafkaAPIVersion{}
	}
	k.h.writeJSON(w, r, http.StatusOK, api.KafkaAPIVersions{APIVersions: vs})
}

// statsResource serves /v1/stats (SeriesBackend).
type statsResource struct{ h *handler }

func (s statsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/series", s.series)
	return r
}

func (s statsResource) series(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.h.b.(api.SeriesBackend)
	if !ok {
		s.h.problem(w, r, fmt.Errorf("%w: no series", api.ErrNotImplemented))
		return
	}
	ser, err := sb.Series(r.Context())
	if err != nil {
		s.h.problem(w, r, err)
		return
	}
	s.h.writeJSON(w, r, http.StatusOK, normalizeSeries(ser))
}

func normalizeSeries(s api.Series) api.Series {
	if s.Topics == nil {
		s.Topics = []api.TopicSeries{}
	}
	if s.Groups == nil {
		s.Groups = []api.GroupSeries{}
	}
	for i := range s.Topics {
		t := &s.Topics[i]
		for _, p := range []*[]int64{&t.ProducedRecords, &t.ProducedBytes, &t.ConsumedRecords, &t.ConsumedBytes} {
			if *p == nil {
				*p = []int64{}
			}
		}
	}
	for i := range s.Groups {
		if s.Groups[i].Lag == nil {
			s.Groups[i].Lag = []int64{}
		}
	}
	return s
}
