package rest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type wireGroupRecord struct {
	Topic string `json:"topic"`
	api.ConsumedJSON
}

type wireGroupPoll struct {
	api.GroupMembership
	Records []wireGroupRecord `json:"records"`
}

// groupsResource serves /v1/groups (GroupsBackend).
type groupsResource struct{ h *handler }

func (g groupsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", g.list)
	r.Get("/{group}", g.describe)
	r.Delete("/{group}", g.delete)
	r.Get("/{group}/offsets", g.offsets)
	r.Post("/{group}/offsets", g.commit)
	r.Post("/{group}/offsets/reset", g.reset)
	r.Post("/{group}/members", g.join)
	r.Get("/{group}/members/{member}/records", g.poll)
	r.Post("/{group}/members/{member}/offsets", g.commitMember)
	r.Delete("/{group}/members/{member}", g.leave)
	return r
}

func (g groupsResource) backend(w http.ResponseWriter, r *http.Request) (api.GroupsBackend, bool) {
	gb, ok := g.h.b.(api.GroupsBackend)
	if !ok {
		g.h.problem(w, r, fmt.Errorf("%w: consumer groups", api.ErrNotImplemented))
	}
	return gb, ok
}

// groupParam returns the {group} path parameter, unescaped (a group id may
// hold any character, "/" included).
func groupParam(r *http.Request) (string, error) {
	name := pathParam(r, "group")
	if name == "" || len(name) > 255 {
		return "", &api.FieldError{Field: "path.group", Err: api.ErrInvalidRequest, Msg: "must be 1 to 255 characters"}
	}
	return name, nil
}

// pathParam returns a path parameter unescaped.
func pathParam(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if un, err := url.PathUnescape(v); err == nil {
		return un
	}
	return v
}

// groupCall runs fn with the backend and the group, answering problems.
func (g groupsResource) groupCall(w http.ResponseWriter, r *http.Request, fn func(api.GroupsBackend, string) (any, int, error)) {
	gb, ok := g.backend(w, r)
	if !ok {
		return
	}
	name, err := groupParam(r)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	out, status, err := fn(gb, name)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	if out == nil {
		w.WriteHeader(status)
		return
	}
	g.h.writeJSON(w, r, status, out)
}

func (g groupsResource) list(w http.ResponseWriter, r *http.Request) {
	gb, ok := g.backend(w, r)
	if !ok {
		return
	}
	query, err := listQueryParams(r, api.DefaultGroupPage, api.MaxGroupPage)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	page, err := gb.ListGroups(r.Context(), query)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	out := api.GroupList{Groups: page.Groups}
	if out.Groups == nil {
		out.Groups = []api.GroupSummary{}
	}
	if page.More && len(page.Groups) > 0 {
		out.NextCursor = nextPage(w, r, page.Groups[len(page.Groups)-1].Group)
	}
	g.h.writeJSON(w, r, http.StatusOK, out)
}

func (g groupsResource) describe(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		d, err := gb.DescribeGroup(r.Context(), name)
		return normalizeGroup(d), http.StatusOK, err
	})
}

func normalizeGroup(d api.GroupDetail) api.GroupDetail {
	if d.Members == nil {
		d.Members = []api.GroupMemberDetail{}
	}
	for i := range d.Members {
		d.Members[i].Assignment = nonNilAssignment(d.Members[i].Assignment)
	}
	if d.Offsets == nil {
		d.Offsets = []api.GroupPartitionLag{}
	}
	return d
}

func nonNilAssignment(a []api.TopicPartitions) []api.TopicPartitions {
	if a == nil {
		return []api.TopicPartitions{}
	}
	return a
}

func (g groupsResource) delete(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		return nil, http.StatusNoContent, gb.DeleteGroup(r.Context(), name)
	})
}

func groupOffsets(name string, offs []api.GroupOffset) api.GroupOffsets {
	if offs == nil {
		offs = []api.GroupOffset{}
	}
	return api.GroupOffsets{Group: name, Offsets: offs}
}

func (g groupsResource) offsets(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		offs, err := gb.GroupOffsets(r.Context(), name)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) commit(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		var req api.GroupCommitRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		offs, err := gb.CommitGroupOffsets(r.Context(), name, req)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) reset(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		var req api.GroupResetRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		switch {
		case req.Strategy == api.ResetTimestamp && req.Timestamp == nil:
			return nil, 0, &api.FieldError{Field: "body.timestamp", Err: api.ErrInvalidRequest, Msg: "required by strategy timestamp"}
		case req.Strategy == api.ResetOffset && req.Offset == nil:
			return nil, 0, &api.FieldError{Field: "body.offset", Err: api.ErrInvalidRequest, Msg: "required by strategy offset"}
		}
		res, err := gb.ResetGroupOffsets(r.Context(), name, req)
		if res.Offsets == nil {
			res.Offsets = []api.PlannedOffset{}
		}
		res.Group = name
		return res, http.StatusOK, err
	})
}

func (g groupsResource) join(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		var req api.GroupJoinRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			req.ClientHost = host
		}
		m, err := gb.JoinGroup(r.Context(), name, req)
		m.Assignment = nonNilAssignment(m.Assignment)
		return m, http.StatusOK, err
	})
}

// groupPollCost is what a group poll holds per byte of max_bytes: its
// answer is built whole before it is written (records, their JSON, the body).
const groupPollCost = 5

func (g groupsResource) poll(w http.ResponseWriter, r *http.Request) {
	if wait := r.URL.Query().Get("wait_ms"); wait != "" && wait != "0" {
		client := g.h.opts.ClientAddr(r)
		if err := g.h.longPolls.take(client); err != nil {
			g.h.problem(w, r, err)
			return
		}
		defer g.h.longPolls.release(client)
	}
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		q := r.URL.Query()
		maxRecords, err := intParam(q, "max_records", 100, 1, 10000)
		if err != nil {
			return nil, 0, err
		}
		maxBytes, err := intParam(q, "max_bytes", 1<<20, 1, 64<<20)
		if err != nil {
			return nil, 0, err
		}
		waitMS, err := intParam(q, "wait_ms", 0, 0, 60000)
		if err != nil {
			return nil, 0, err
		}
		// The answer is built whole (records, their JSON, the body):
		// max_bytes shrinks to what the memory budget has free. The
		// bytes are given back when the request ends (after the write).
		held := g.h.mem.takeUpTo(maxBytes*groupPollCost, min(maxBytes, consumeMinBytes)*groupPollCost)
		if held == 0 {
			return nil, 0, fmt.Errorf("%w: no memory left for a %d-byte poll", api.ErrOverloaded, maxBytes)
		}
		context.AfterFunc(r.Context(), func() { g.h.mem.give(held) })
		req := api.GroupPollRequest{MaxRecords: int(maxRecords), MaxBytes: int(held / groupPollCost),
			Wait: min(time.Duration(waitMS)*time.Millisecond, g.h.opts.MaxWait)}
		if req.ReadUncommitted, err = isolationParam(q); err != nil {
			return nil, 0, err
		}
		res, err := gb.PollGroup(r.Context(), name, pathParam(r, "member"), req)
		if err != nil {
			return nil, 0, err
		}
		enc := encodingParam(q.Get("encoding"))
		out := wireGroupPoll{GroupMembership: res.GroupMembership, Records: make([]wireGroupRecord, len(res.Records))}
		out.Assignment = nonNilAssignment(out.Assignment)
		for i, rec := range res.Records {
			out.Records[i] = wireGroupRecord{Topic: rec.Topic, ConsumedJSON: api.EncodeRecord(rec.ConsumedRecord, enc)}
			g.h.metrics.consumed(rec.Topic, 1, api.RecordSize(rec.Key, rec.Value, rec.Headers))
		}
		return out, http.StatusOK, nil
	})
}

func (g groupsResource) commitMember(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		var req api.GroupMemberOffsets
		if r.ContentLength != 0 {
			if err := decodeJSONBody(r, &req); err != nil {
				return nil, 0, err
			}
		}
		offs, err := gb.CommitMember(r.Context(), name, pathParam(r, "member"), req.Offsets)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) leave(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb api.GroupsBackend, name string) (any, int, error) {
		return nil, http.StatusNoContent, gb.LeaveGroup(r.Context(), name, pathParam(r, "member"))
	})
}
