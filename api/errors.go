package api

import (
	"errors"
	"net/http"
	"regexp"
)

// Sentinel errors. The backend wraps them (fmt.Errorf("%w: ...", api.ErrUnknownTopic))
// and api maps them to an HTTP status and a stable problem type with ProblemFor.
var (
	ErrInvalidRequest    = errors.New("api: invalid request")
	ErrInvalidTopicName  = errors.New("api: invalid topic name")
	ErrInvalidConfig     = errors.New("api: invalid config")
	ErrInvalidPartitions = errors.New("api: invalid partition count or replication factor")
	// ErrPolicyViolation: a valid request the cluster's limits refuse
	// (e.g. more partitions than --max-partitions allows).
	ErrPolicyViolation = errors.New("api: refused by the cluster's limits")
	// ErrQuorumChange: a controller membership change refused because it
	// could break the quorum.
	ErrQuorumChange      = errors.New("api: quorum change refused")
	ErrMalformedJSON     = errors.New("api: malformed JSON")
	ErrUnknownTopic      = errors.New("api: unknown topic")
	ErrUnknownPartition  = errors.New("api: unknown partition")
	ErrUnknownGroup      = errors.New("api: unknown group")
	ErrNotFound          = errors.New("api: not found")
	ErrMethodNotAllowed  = errors.New("api: method not allowed")
	ErrTopicExists       = errors.New("api: topic already exists")
	ErrConflict          = errors.New("api: conflict")
	ErrOffsetOutOfRange  = errors.New("api: offset out of range")
	ErrBodyTooLarge      = errors.New("api: request body too large")
	ErrTooLarge          = errors.New("api: record too large")
	ErrUnsupportedMedia  = errors.New("api: unsupported media type")
	ErrNotReady          = errors.New("api: not ready")
	ErrNotLeader         = errors.New("api: not the leader")
	ErrNotController     = errors.New("api: not the active controller")
	ErrNotEnoughReplicas = errors.New("api: not enough in-sync replicas")
	ErrTimeout           = errors.New("api: timed out")
	ErrNotImplemented    = errors.New("api: not implemented")
	ErrBodyTimeout       = errors.New("api: request body not received in time")
	// ErrStorage: the partition's disk refuses writes (full, I/O error);
	// writes resume by themselves once it takes them again.
	ErrStorage        = errors.New("api: storage error")
	ErrTooManyRecords = errors.New("api: too many records in one request")
	// ErrCorruptBatch is a stored record batch that cannot be decoded;
	// a *CorruptBatchError says which one and where records resume.
	ErrCorruptBatch = errors.New("api: stored record batch cannot be decoded")
	// ErrInternalTopic: clients cannot write, delete, create or reconfigure
	// an internal topic (__consumer_offsets, ...); its coordinator does.
	ErrInternalTopic = errors.New("api: internal topic")
	// ErrHostNotAllowed: the Host header names no host this node serves
	// (DNS rebinding); see HostCheck.
	ErrHostNotAllowed = errors.New("api: host not allowed")
	// ErrTooManyRequests: a concurrency limit (long polls, streams,
	// connections; per node or per client) is full. Retry later.
	ErrTooManyRequests = errors.New("api: too many concurrent requests")
	// ErrConnectionRate: one client address opens connections faster than
	// the node's connection creation rate per address. Retry later.
	ErrConnectionRate = errors.New("api: connection rate exceeded")
	// ErrOverloaded: the node's HTTP memory budget is in use. Retry later.
	ErrOverloaded = errors.New("api: node overloaded")
	// ErrIdempotencyKeyReused: an Idempotency-Key already served for a
	// different request (another body, topic or encoding).
	ErrIdempotencyKeyReused = errors.New("api: idempotency key reused for a different request")
	// ErrIdempotencyKeyInFlight: a request with the same Idempotency-Key
	// is still being served. Retry once it is answered.
	ErrIdempotencyKeyInFlight = errors.New("api: idempotency key in flight")
)

// ProblemTypePrefix starts every problem type URI.
const ProblemTypePrefix = "urn:runnel:problem:"

// ProblemKind is one row of the error table: what a sentinel error becomes.
type ProblemKind struct {
	Err    error
	Status int
	Type   string // stable problem type URI
	Title  string
}

// problemKinds is THE error table, most specific first; the first row whose
// Err matches (errors.Is) wins. Returned by ProblemKinds for docs and tests.
func problemKinds() []ProblemKind {
	return []ProblemKind{
		{ErrInvalidTopicName, http.StatusBadRequest, "invalid-topic-name", "Invalid topic name"},
		{ErrInvalidConfig, http.StatusBadRequest, "invalid-config", "Invalid topic config"},
		{ErrInvalidPartitions, http.StatusBadRequest, "invalid-partitions", "Invalid partition count or replication factor"},
		{ErrMalformedJSON, http.StatusBadRequest, "malformed-json", "Malformed JSON"},
		{ErrPolicyViolation, http.StatusUnprocessableEntity, "policy-violation", "Refused by the cluster's limits"},
		{ErrInvalidRequest, http.StatusBadRequest, "invalid-request", "Invalid request"},
		{ErrUnknownTopic, http.StatusNotFound, "unknown-topic", "Unknown topic"},
		{ErrUnknownPartition, http.StatusNotFound, "unknown-partition", "Unknown partition"},
		{ErrUnknownGroup, http.StatusNotFound, "unknown-group", "Unknown consumer group"},
		{ErrNotFound, http.StatusNotFound, "not-found", "Not found"},
		{ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated", "Authentication required"},
		{ErrCSRF, http.StatusForbidden, "csrf-token-invalid", "Missing or wrong CSRF token"},
		{ErrForbidden, http.StatusForbidden, "forbidden", "Forbidden: a permission is missing"},
		{ErrInternalTopic, http.StatusForbidden, "internal-topic", "Internal topic: written only by its coordinator"},
		{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed"},
		{ErrTopicExists, http.StatusConflict, "topic-exists", "Topic already exists"},
		{ErrIdempotencyKeyInFlight, http.StatusConflict, "idempotency-key-in-flight", "A request with this Idempotency-Key is still being served"},
		{ErrConflict, http.StatusConflict, "conflict", "Conflict"},
		{ErrQuorumChange, http.StatusConflict, "quorum-change-refused", "Controller change refused: it could break the quorum"},
		{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "request-too-large", "Request body too large"},
		{ErrTooLarge, http.StatusRequestEntityTooLarge, "record-too-large", "Record larger than max.message.bytes"},
		{ErrTooManyRecords, http.StatusRequestEntityTooLarge, "too-many-records", "Too many records in one request"},
		{ErrHostNotAllowed, http.StatusMisdirectedRequest, "host-not-allowed", "Host not allowed"},
		{ErrBodyTimeout, http.StatusRequestTimeout, "request-timeout", "Request body not received in time"},
		{ErrUnsupportedMedia, http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type"},
		{ErrOffsetOutOfRange, http.StatusRequestedRangeNotSatisfiable, "offset-out-of-range", "Offset out of range"},
		{ErrIdempotencyKeyReused, http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key already used for a different request"},
		{ErrCorruptBatch, http.StatusUnprocessableEntity, "corrupt-batch", "Stored record batch cannot be decoded"},
		{ErrNotImplemented, http.StatusNotImplemented, "not-implemented", "Not implemented by this node"},
		{ErrQuotaExceeded, http.StatusTooManyRequests, "quota-exceeded", "Client quota exceeded"},
		{ErrTooManyRequests, http.StatusTooManyRequests, "too-many-requests", "Too many concurrent requests"},
		{ErrConnectionRate, http.StatusTooManyRequests, "connection-rate-exceeded", "New connections from this address too fast"},
		{ErrOverloaded, http.StatusServiceUnavailable, "overloaded", "Node memory budget for HTTP requests in use"},
		{ErrNotReady, http.StatusServiceUnavailable, "not-ready", "Node not ready"},
		{ErrNotLeader, http.StatusServiceUnavailable, "not-leader", "Not the partition leader"},
		{ErrNotController, http.StatusServiceUnavailable, "not-controller", "Not the active controller"},
		{ErrNotEnoughReplicas, http.StatusServiceUnavailable, "not-enough-replicas", "Not enough in-sync replicas"},
		{ErrTimeout, http.StatusGatewayTimeout, "timeout", "Timed out"},
		{ErrStorage, http.StatusInsufficientStorage, "storage-error", "Storage error"},
	}
}

// internalKind is what an error matching no row becomes.
func internalKind() ProblemKind {
	return ProblemKind{Status: http.StatusInternalServerError, Type: "internal", Title: "Internal server error"}
}

// ProblemKinds returns a copy of the error table with full type URIs.
func ProblemKinds() []ProblemKind {
	kinds := append(problemKinds(), internalKind())
	for i := range kinds {
		kinds[i].Type = ProblemTypePrefix + kinds[i].Type
	}
	return kinds
}

// KindOf returns the table row for err (the internal row when none matches).
func KindOf(err error) ProblemKind {
	for _, k := range problemKinds() {
		if errors.Is(err, k.Err) {
			k.Type = ProblemTypePrefix + k.Type
			return k
		}
	}
	k := internalKind()
	k.Type = ProblemTypePrefix + k.Type
	return k
}

// Problem is an RFC 9457 application/problem+json body.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Field names the offending request field or parameter, when known
	// (e.g. "records[3].value", "query.offset").
	Field string `json:"field,omitempty"`
	// Topic, Partition, Offset and NextOffset name a stored batch that
	// cannot be decoded (corrupt-batch): reading from NextOffset moves
	// past it (absent when unknown).
	Topic      string `json:"topic,omitempty"`
	Partition  *int32 `json:"partition,omitempty"`
	Offset     *int64 `json:"offset,omitempty"`
	NextOffset *int64 `json:"next_offset,omitempty"`
}

// CorruptBatchError is an ErrCorruptBatch naming the batch: the read
// wanted Offset of Topic-Partition, and records resume at NextOffset (-1:
// unknown).
type CorruptBatchError struct {
	Topic      string
	Partition  int32
	Offset     int64
	NextOffset int64
	Err        error
}

func (e *CorruptBatchError) Error() string   { return e.Err.Error() }
func (e *CorruptBatchError) Unwrap() []error { return []error{ErrCorruptBatch, e.Err} }

// NewProblem builds the problem body for err (status, type and title from
// the error table; field and batch position when err carries them).
func NewProblem(err error) Problem {
	k := KindOf(err)
	p := Problem{Type: k.Type, Title: k.Title, Status: k.Status, Detail: userMessage(err.Error())}
	var fe *FieldError
	if errors.As(err, &fe) {
		p.Field = fe.Field
	}
	var cb *CorruptBatchError
	if errors.As(err, &cb) {
		p.Topic, p.Partition, p.Offset = cb.Topic, &cb.Partition, &cb.Offset
		if cb.NextOffset >= 0 {
			p.NextOffset = &cb.NextOffset
		}
	}
	return p
}

// packagePrefix matches the "pkg: " prefixes Go errors carry inside the
// process (api: ..., raftfsm: ...), which mean nothing to a client.
var packagePrefix = regexp.MustCompile(`\b(api|raftfsm|segments|recordbatch|kafkaproto|server|web): `)

// userMessage is an error text as a client reads it: without the names of
// runnel's internal packages ("create topic orders: topic already exists:
// orders", not "... raftfsm: topic already exists ...").
func userMessage(s string) string {
	return packagePrefix.ReplaceAllString(s, "")
}

// FieldError is an ErrInvalidRequest (or other sentinel) naming a field.
type FieldError struct {
	Field string
	Err   error // wraps a sentinel, e.g. ErrInvalidRequest
	Msg   string
}

func (e *FieldError) Error() string { return e.Err.Error() + ": " + e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return e.Err }
