package api

import (
	"context"
)

// ACLsBackend is optionally implemented by a Backend that keeps ACLs
// (Kafka's model, in the metadata log): GET|POST|DELETE /v1/acls. Safe for
// concurrent use. Errors wrap ErrInvalidRequest for a bad ACL.
type ACLsBackend interface {
	ListACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
	CreateACL(ctx context.Context, a ACL) (ACL, error)
	// DeleteACLs removes the ACLs f selects and returns them.
	DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
}

// ACL is one access control entry (POST /v1/acls body).
type ACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type,omitempty"` // default literal
	Principal    string `json:"principal"`
	Host         string `json:"host,omitempty"` // default *
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// ACLFilter selects ACLs by the query parameters of GET and DELETE
// /v1/acls (same names as ACL's fields); an empty field matches any.
type ACLFilter ACL

// ACLList is the body of GET and DELETE /v1/acls.
type ACLList struct {
	ACLs []ACL `json:"acls"`
}
