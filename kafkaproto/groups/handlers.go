package groups

import (
	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Handlers lists the group APIs with the versions they serve, by key; the
// listener's table (kafkaproto/handlers.go) takes them in. Each entry's
// constants and functions live in the file named after the API.
func Handlers() []kapi.Handler {
	return []kapi.Handler{
		kapi.Handle(offsetCommitKey, offsetCommitMin, offsetCommitMax, offsetCommit, offsetCommitError),
		kapi.Handle(offsetFetchKey, offsetFetchMin, offsetFetchMax, offsetFetch, offsetFetchError),
		kapi.Handle(findCoordinatorKey, findCoordinatorMin, findCoordinatorMax, findCoordinator, findCoordinatorError),
		kapi.Handle(joinGroupKey, joinGroupMin, joinGroupMax, joinGroup, joinGroupError),
		kapi.Handle(heartbeatKey, heartbeatMin, heartbeatMax, heartbeat, heartbeatError),
		kapi.Handle(leaveGroupKey, leaveGroupMin, leaveGroupMax, leaveGroup, leaveGroupError),
		kapi.Handle(syncGroupKey, syncGroupMin, syncGroupMax, syncGroup, syncGroupError),
		kapi.Handle(describeGroupsKey, describeGroupsMin, describeGroupsMax, describeGroups, describeGroupsError),
		kapi.Handle(listGroupsKey, listGroupsMin, listGroupsMax, listGroups, listGroupsError),
		kapi.Handle(deleteGroupsKey, deleteGroupsMin, deleteGroupsMax, deleteGroups, deleteGroupsError),
		kapi.Handle(offsetDeleteKey, offsetDeleteMin, offsetDeleteMax, offsetDelete, offsetDeleteError),
	}
}

// coordinator returns the broker's GroupCoordinator, or nil.
func coordinator(env kapi.Env) kapi.GroupCoordinator {
	gc, _ := env.Broker().(kapi.GroupCoordinator)
	return gc
}

// errNoCoordinator is what group APIs answer when the broker has none.
var errNoCoordinator = kapi.ErrCoordinatorNotAvailable

// pendingTxnOffset is TxnCoordinator.PendingTxnOffset; false without one.
func pendingTxnOffset(env kapi.Env, group string, t kapi.TopicPartition) bool {
	tc, _ := env.Broker().(kapi.TxnCoordinator)
	return tc != nil && tc.PendingTxnOffset(group, t)
}
