package rest

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/runnel/runnel/api"
)

// validationOptions: defaults are not written back (that would re-encode the
// body and reorder the keys of produced JSON values); handlers apply defaults.
func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		SkipSettingDefaults: true,
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
	}
}

// validate checks the request against openapi.yaml (parameters and JSON
// bodies; NDJSON lines are checked by the produce decoder against the same
// ProduceRecord schema) and answers 400 problem+json naming the field.
func (h *handler) validate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := h.spec.FindRoute(r)
		if err != nil {
			// chi owns routing: a /v1 request the spec does not know falls
			// through to chi's 404/405.
			next.ServeHTTP(w, r)
			return
		}
		in := &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route, Options: validationOptions(),
		}
		if route.Operation != nil && route.Operation.OperationID == "produceRecords" {
			// The produce decoder checks every record against the same
			// ProduceRecord schema, strictly and naming the field; validating
			// the body here as well doubled the cost of a produce request.
			// Only its media type is checked here.
			if err := produceMediaType(r.Header.Get("Content-Type")); err != nil {
				h.problem(w, r, err)
				return
			}
			in.Options.ExcludeRequestBody = true
		}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			h.problem(w, r, requestProblem(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestProblem turns a kin-openapi validation error into an api error naming
// the field: "query.offset", "path.topic", "body" or "body.records[3].key".
func requestProblem(err error) error {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return fmt.Errorf("%w: %v", api.ErrInvalidRequest, err)
	}
	field := "body"
	if re.Parameter != nil {
		field = re.Parameter.In + "." + re.Parameter.Name
	}
	var se *openapi3.SchemaError
	msg := re.Error()
	if errors.As(re.Err, &se) {
		if p := se.JSONPointer(); len(p) > 0 {
			field += "." + jsonPath(p)
		}
		msg = se.Reason
		if se.Reason == "" {
			msg = se.Error()
		}
	}
	sentinel := api.ErrInvalidRequest
	switch {
	case strings.HasPrefix(re.Reason, "header Content-Type has unexpected value"):
		sentinel, field = api.ErrUnsupportedMedia, "header.Content-Type"
		msg = re.Reason + "; send " + strings.Join(sortedKeys(re.RequestBody.Content), " or ")
	case re.RequestBody != nil && strings.Contains(re.Reason, "failed to decode request body"):
		sentinel, msg = api.ErrMalformedJSON, re.Error()
	case re.RequestBody != nil && errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
		msg = "a request body is required"
	case re.Parameter != nil && se == nil:
		msg = re.Error()
	}
	return &api.FieldError{Field: field, Err: sentinel, Msg: msg}
}

// jsonPath renders a JSON pointer's tokens as records[3].key.
func jsonPath(tokens []string) string {
	var b strings.Builder
	for i, t := range tokens {
		if t != "" && strings.Trim(t, "0123456789") == "" {
			b.WriteString("[" + t + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

// produceMediaType accepts the produce body types.
func produceMediaType(contentType string) error {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil && (mt == "application/json" || mt == "application/x-ndjson" || mt == api.MediaOctetStream || mt == api.MediaRecordBatch) {
		return nil
	}
	return &api.FieldError{Field: "header.Content-Type", Err: api.ErrUnsupportedMedia,
		Msg: fmt.Sprintf("%q; send application/json, application/x-ndjson, %s or %s", contentType, api.MediaOctetStream, api.MediaRecordBatch)}
}
