package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ACLs over Kafka (CreateAcls, DescribeAcls, DeleteAcls): the wire's enums
// become the lower-case names of the broker's ACL model, and back.

var (
	aclResourceNames = map[kmsg.ACLResourceType]string{kmsg.ACLResourceTypeTopic: "topic", kmsg.ACLResourceTypeGroup: "group",
		kmsg.ACLResourceTypeCluster: "cluster", kmsg.ACLResourceTypeTransactionalId: "transactional_id"}
	aclPatternNames = map[kmsg.ACLResourcePatternType]string{kmsg.ACLResourcePatternTypeLiteral: "literal", kmsg.ACLResourcePatternTypePrefixed: "prefixed"}
	aclOpNames      = map[kmsg.ACLOperation]string{kmsg.ACLOperationAll: "all", kmsg.ACLOperationRead: "read", kmsg.ACLOperationWrite: "write",
		kmsg.ACLOperationCreate: "create", kmsg.ACLOperationDelete: "delete", kmsg.ACLOperationAlter: "alter", kmsg.ACLOperationDescribe: "describe",
		kmsg.ACLOperationClusterAction: "cluster_action", kmsg.ACLOperationDescribeConfigs: "describe_configs",
		kmsg.ACLOperationAlterConfigs: "alter_configs", kmsg.ACLOperationIdempotentWrite: "idempotent_write"}
	aclPermNames = map[kmsg.ACLPermissionType]string{kmsg.ACLPermissionTypeAllow: "allow", kmsg.ACLPermissionTypeDeny: "deny"}
)

// wireName is the name of a wire enum value: "" for ANY (a filter's
// wildcard), ok false for a value runnel does not know.
func wireName[T comparable](names map[T]string, v, anyV T) (string, bool) {
	if v == anyV {
		return "", true
	}
	n, ok := names[v]
	return n, ok
}

// wireValue is the wire enum of a name (unknown names cannot come from
// the broker, which validated them).
func wireValue[T comparable](names map[T]string, name string) T {
	for k, n := range names {
		if n == name {
			return k
		}
	}
	var zero T
	return zero
}

// aclFromWire converts an entry or a filter; ok is false for a value
// runnel does not know (or MATCH, which it does not resolve).
func aclFromWire(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, version int16) (kapi.ACL, bool) {
	var a kapi.ACL
	var ok1, ok2, ok3, ok4 bool
	a.ResourceType, ok1 = wireName(aclResourceNames, rt, kmsg.ACLResourceTypeAny)
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral // v0 knows only literal names
	}
	a.PatternType, ok2 = wireName(aclPatternNames, pt, kmsg.ACLResourcePatternTypeAny)
	a.Operation, ok3 = wireName(aclOpNames, op, kmsg.ACLOperationAny)
	a.Permission, ok4 = wireName(aclPermNames, perm, kmsg.ACLPermissionTypeAny)
	a.ResourceName, a.Principal, a.Host = deref(name), deref(principal), deref(host)
	return a, ok1 && ok2 && ok3 && ok4
}

func aclAdmin(env kapi.Env) (kapi.ACLAdmin, bool) {
	a, ok := env.Broker().(kapi.ACLAdmin)
	return a, ok
}
