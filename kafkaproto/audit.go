package kafkaproto

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The audit log (issue 15): every request that changes the cluster (topics,
// configs, records deleted, ACLs, users, quotas, group deletions and offset
// deletions, reassignments, leader elections, log dirs, features, voters)
// is logged at INFO with audit=true, the principal, the client address,
// door=kafka, what it names and its result. Requests carry no secret in
// the fields logged: only resource names are taken from them (never bytes,
// so not the salted passwords of AlterUserScramCredentials).

// auditKeys are the API keys that change the cluster, served or not yet.
var auditKeys = map[kmsg.Key]bool{
	kmsg.CreateTopics: true, kmsg.DeleteTopics: true, kmsg.CreatePartitions: true, kmsg.DeleteRecords: true,
	kmsg.AlterConfigs: true, kmsg.IncrementalAlterConfigs: true, kmsg.AlterReplicaLogDirs: true,
	kmsg.CreateACLs: true, kmsg.DeleteACLs: true, kmsg.AlterClientQuotas: true, kmsg.AlterUserSCRAMCredentials: true,
	kmsg.DeleteGroups: true, kmsg.OffsetDelete: true, kmsg.ElectLeaders: true, kmsg.AlterPartitionAssignments: true,
	kmsg.UpdateFeatures: true, kmsg.UnregisterBroker: true, kmsg.AddRaftVoter: true, kmsg.RemoveRaftVoter: true,
}

// maxAuditNames bounds the names one audit line lists.
const maxAuditNames = 20

// audit logs one served request if it changes the cluster.
func (c *conn) audit(h header, req kmsg.Request, resp kmsg.Response) {
	if !auditKeys[kmsg.Key(h.key)] || c.state.door == peerDoor {
		return
	}
	principal := c.state.principal
	if principal == "" {
		principal = "anonymous"
	}
	result := "ok"
	if codes := responseErrors(resp); len(codes) > 0 {
		result = "error: " + strings.Join(codes, ",")
	}
	c.s.log.LogAttrs(c.s.ctx, slog.LevelInfo, "audit",
		slog.Bool("audit", true), slog.String("door", "kafka"), slog.String("principal", principal),
		slog.String("client", c.nc.RemoteAddr().String()), slog.String("client_id", deref(h.clientID)),
		slog.String("action", kmsg.NameForKey(h.key)), slog.String("resources", strings.Join(requestNames(req), ",")),
		slog.String("result", result))
}

// requestNames collects the resource names a request carries: string
// fields named Topic, TopicName(s), ResourceName, Group, Name, Principal,
// Type and Key (quota entity parts and keys), to maxAuditNames.
func requestNames(req kmsg.Request) []string {
	var out []string
	var walk func(v reflect.Value, field string)
	walk = func(v reflect.Value, field string) {
		if len(out) >= maxAuditNames {
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), field)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), v.Type().Field(i).Name)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return // bytes: records, salts, salted passwords
			}
			for i := range v.Len() {
				walk(v.Index(i), field)
			}
		case reflect.String:
			switch field {
			case "Topic", "TopicName", "TopicNames", "ResourceName", "Group", "Groups", "Name", "Principal":
				out = append(out, v.String())
			}
		}
	}
	walk(reflect.ValueOf(req), "")
	return out
}

// responseErrors lists a response's non-zero error codes (by name), once each.
func responseErrors(resp kmsg.Response) []string {
	seen := map[int16]bool{}
	var out []string
	var walk func(v reflect.Value, field string)
	walk = func(v reflect.Value, field string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), field)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), v.Type().Field(i).Name)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				for i := range v.Len() {
					walk(v.Index(i), field)
				}
			}
		case reflect.Int16:
			if field == "ErrorCode" && v.Int() != 0 && !seen[int16(v.Int())] {
				seen[int16(v.Int())] = true
				out = append(out, errorName(int16(v.Int())))
			}
		}
	}
	walk(reflect.ValueOf(resp), "")
	return out
}

func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprint(code)
}
