package kapi

// Authentication and authorization: the optional parts of a Broker that
// keep users and ACLs.

// Authenticator is optionally implemented by a Broker that keeps users:
// without it SaslHandshake lists no mechanism and refuses every one. Safe
// for concurrent use.
type Authenticator interface {
	// ScramCredential returns user's stored credential for mechanism
	// (SCRAM-SHA-256 or SCRAM-SHA-512); ok is false when there is none.
	ScramCredential(mechanism, user string) (cred ScramCredential, ok bool)
	// CheckPassword reports whether password is user's (SASL PLAIN).
	CheckPassword(user, password string) bool
}

// ScramCredential is RFC 5802's stored form of a password.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// KafkaAuthorizer is optionally implemented by a Broker that enforces
// ACLs; without it every request is allowed. Safe for concurrent use.
type KafkaAuthorizer interface {
	// Authorize reports whether principal, connected from host, may do op
	// (read, write, create, ...) on the resource (topic, group, cluster,
	// transactional_id; the cluster is named "kafka-cluster").
	Authorize(principal, host, resourceType, name, op string) bool
}
