package kafkadoor

import (
	"context"
	"errors"
	"fmt"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/auth"
)

// The security surface on the Kafka door: the one authorizer, the ACL
// admin APIs and SASL's credentials, all of server/access.

// ACLs, Kafka door.

var _ kafkaproto.KafkaAuthorizer = (*Backend)(nil)

func (k *Backend) Authorize(principal, host, resourceType, name, op string) bool {
	return k.cfg.Access.Allowed(principal, host, resourceType, name, op)
}

var _ kafkaproto.ACLAdmin = (*Backend)(nil)

func (k *Backend) CreateACLs(ctx context.Context, acls []kafkaproto.ACL) error {
	as := make([]auth.ACL, len(acls))
	for i, a := range acls {
		as[i] = auth.ACL(a)
	}
	err := k.cfg.Access.CreateACLs(ctx, as)
	if errors.Is(err, auth.ErrInvalidACL) {
		return fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafka(err)
}

func (k *Backend) DescribeACLs(_ context.Context, f kafkaproto.ACL) ([]kafkaproto.ACL, error) {
	return toKafkaACLs(k.cfg.Access.ListACLs(auth.Filter(f))), nil
}

func (k *Backend) DeleteACLs(ctx context.Context, f kafkaproto.ACL) ([]kafkaproto.ACL, error) {
	acls, err := k.cfg.Access.DeleteACLs(ctx, auth.Filter(f))
	if errors.Is(err, auth.ErrInvalidACL) {
		return nil, fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafkaACLs(acls), toKafka(err)
}

func toKafkaACLs(acls []auth.ACL) []kafkaproto.ACL {
	out := make([]kafkaproto.ACL, len(acls))
	for i, a := range acls {
		out[i] = kafkaproto.ACL(a)
	}
	return out
}

// Users, Kafka door (SASL).

var _ kafkaproto.Authenticator = (*Backend)(nil)

func (k *Backend) ScramCredential(mechanism, user string) (kafkaproto.ScramCredential, bool) {
	c, ok := k.cfg.Access.ScramCredential(mechanism, user)
	if !ok {
		return kafkaproto.ScramCredential{}, false
	}
	return kafkaproto.ScramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
}

func (k *Backend) CheckPassword(user, password string) bool {
	return k.cfg.Access.CheckPassword(user, password)
}
