package kafkaproto

import "github.com/runnel/runnel/kafkaproto/kapi"

// The listener's contract lives in kafkaproto/kapi, which the API families
// (kafkaproto/admin, groups, txns) share with this package. These aliases
// are its names for everyone else: the server implements kafkaproto.Broker
// and wraps kafkaproto.ErrNotLeader, and needs no second import.

// Aliases of kapi/broker.go: the Broker and its types.
type (
	Broker             = kapi.Broker
	MetadataSource     = kapi.MetadataSource
	Cluster            = kapi.Cluster
	BrokerInfo         = kapi.BrokerInfo
	TopicInfo          = kapi.TopicInfo
	PartitionInfo      = kapi.PartitionInfo
	Partitions         = kapi.Partitions
	ProduceResult      = kapi.ProduceResult
	FetchRequest       = kapi.FetchRequest
	FetchResult        = kapi.FetchResult
	AbortedTransaction = kapi.AbortedTransaction
	Chunk              = kapi.Chunk
	Admin              = kapi.Admin
	TopicSpec          = kapi.TopicSpec
	ResourceType       = kapi.ResourceType
	ConfigResource     = kapi.ConfigResource
	ConfigSource       = kapi.ConfigSource
	ConfigEntry        = kapi.ConfigEntry
	ConfigSynonym      = kapi.ConfigSynonym
	ConfigOpType       = kapi.ConfigOpType
	ConfigOp           = kapi.ConfigOp
	MetadataCatchUp    = kapi.MetadataCatchUp
	TopicLookup        = kapi.TopicLookup
)

// Constants of kapi/broker.go.
const (
	ResourceTopic        = kapi.ResourceTopic
	ResourceBroker       = kapi.ResourceBroker
	ResourceBrokerLogger = kapi.ResourceBrokerLogger
	SourceTopic          = kapi.SourceTopic
	SourceDynamicBroker  = kapi.SourceDynamicBroker
	SourceBrokerLogger   = kapi.SourceBrokerLogger
	SourceStaticBroker   = kapi.SourceStaticBroker
	SourceDefault        = kapi.SourceDefault
	OpSet                = kapi.OpSet
	OpDelete             = kapi.OpDelete
	OpAppend             = kapi.OpAppend
	OpSubtract           = kapi.OpSubtract
)

// Aliases of kapi/optional.go: optional data-path parts.
type (
	QuotaEnforcer      = kapi.QuotaEnforcer
	ReplicatedProducer = kapi.ReplicatedProducer
	AckWait            = kapi.AckWait
	ReplicaWaiter      = kapi.ReplicaWaiter
	TxnMarkerWriter    = kapi.TxnMarkerWriter
	TxnMarker          = kapi.TxnMarker
)

// Aliases of kapi/watch.go: fetch sessions that follow news (issue 19).
type (
	PartitionWatcher = kapi.PartitionWatcher
	Watch            = kapi.Watch
	Watchers         = kapi.Watchers
	FetchClock       = kapi.FetchClock
)

// Aliases of kapi/admin.go: optional admin parts.
type (
	ClusterAdmin      = kapi.ClusterAdmin
	LogDir            = kapi.LogDir
	LogDirPartition   = kapi.LogDirPartition
	Quorum            = kapi.Quorum
	QuorumReplica     = kapi.QuorumReplica
	ACLAdmin          = kapi.ACLAdmin
	ACL               = kapi.ACL
	QuotaEntityPart   = kapi.QuotaEntityPart
	ClientQuota       = kapi.ClientQuota
	QuotaFilter       = kapi.QuotaFilter
	QuotaAdmin        = kapi.QuotaAdmin
	ProducerStates    = kapi.ProducerStates
	ActiveProducer    = kapi.ActiveProducer
	PartitionAssigner = kapi.PartitionAssigner
)

// Aliases of kapi/groups.go: the group coordinator.
type (
	GroupCoordinator = kapi.GroupCoordinator
	MemberRef        = kapi.MemberRef
	GroupProtocol    = kapi.GroupProtocol
	JoinRequest      = kapi.JoinRequest
	JoinResult       = kapi.JoinResult
	JoinedMember     = kapi.JoinedMember
	SyncRequest      = kapi.SyncRequest
	SyncResult       = kapi.SyncResult
	TopicPartition   = kapi.TopicPartition
	CommitOffset     = kapi.CommitOffset
	CommittedOffset  = kapi.CommittedOffset
	GroupListing     = kapi.GroupListing
	GroupDescription = kapi.GroupDescription
	GroupMember      = kapi.GroupMember
)

// Aliases of kapi/txn.go: the transaction coordinator.
type (
	TxnCoordinator = kapi.TxnCoordinator
	TxnProducer    = kapi.TxnProducer
	TxnDescription = kapi.TxnDescription
	TxnFilter      = kapi.TxnFilter
	TxnListing     = kapi.TxnListing
)

// Variables of kapi/txn.go.
var (
	TxnStates = kapi.TxnStates
)

// Aliases of kapi/auth.go: authentication and authorization.
type (
	Authenticator   = kapi.Authenticator
	ScramCredential = kapi.ScramCredential
	KafkaAuthorizer = kapi.KafkaAuthorizer
)

// Variables of kapi/errors.go.
var (
	ErrUnknownTopicOrPartition      = kapi.ErrUnknownTopicOrPartition
	ErrUnknownTopicID               = kapi.ErrUnknownTopicID
	ErrNotLeader                    = kapi.ErrNotLeader
	ErrLeaderNotAvailable           = kapi.ErrLeaderNotAvailable
	ErrNotController                = kapi.ErrNotController
	ErrRequestTimedOut              = kapi.ErrRequestTimedOut
	ErrMessageTooLarge              = kapi.ErrMessageTooLarge
	ErrRecordListTooLarge           = kapi.ErrRecordListTooLarge
	ErrCorruptMessage               = kapi.ErrCorruptMessage
	ErrInvalidRecord                = kapi.ErrInvalidRecord
	ErrInvalidTimestamp             = kapi.ErrInvalidTimestamp
	ErrUnsupportedCompression       = kapi.ErrUnsupportedCompression
	ErrInvalidRequiredAcks          = kapi.ErrInvalidRequiredAcks
	ErrInvalidTopic                 = kapi.ErrInvalidTopic
	ErrTopicExists                  = kapi.ErrTopicExists
	ErrInvalidPartitions            = kapi.ErrInvalidPartitions
	ErrInvalidReplicationFactor     = kapi.ErrInvalidReplicationFactor
	ErrInvalidConfig                = kapi.ErrInvalidConfig
	ErrInvalidRequest               = kapi.ErrInvalidRequest
	ErrPolicyViolation              = kapi.ErrPolicyViolation
	ErrOffsetOutOfRange             = kapi.ErrOffsetOutOfRange
	ErrDuplicateSequence            = kapi.ErrDuplicateSequence
	ErrOutOfOrderSequence           = kapi.ErrOutOfOrderSequence
	ErrInvalidProducerEpoch         = kapi.ErrInvalidProducerEpoch
	ErrUnknownProducerID            = kapi.ErrUnknownProducerID
	ErrTransactionsUnsupported      = kapi.ErrTransactionsUnsupported
	ErrNotEnoughReplicas            = kapi.ErrNotEnoughReplicas
	ErrNotEnoughReplicasAfter       = kapi.ErrNotEnoughReplicasAfter
	ErrFencedLeaderEpoch            = kapi.ErrFencedLeaderEpoch
	ErrUnknownLeaderEpoch           = kapi.ErrUnknownLeaderEpoch
	ErrStorage                      = kapi.ErrStorage
	ErrReassignmentInProgress       = kapi.ErrReassignmentInProgress
	ErrNoReassignmentInProgress     = kapi.ErrNoReassignmentInProgress
	ErrInvalidReplicaAssignment     = kapi.ErrInvalidReplicaAssignment
	ErrElectionNotNeeded            = kapi.ErrElectionNotNeeded
	ErrPreferredLeaderNotAvailable  = kapi.ErrPreferredLeaderNotAvailable
	ErrEligibleLeadersNotAvailable  = kapi.ErrEligibleLeadersNotAvailable
	ErrLogDirNotFound               = kapi.ErrLogDirNotFound
	ErrReplicaNotAvailable          = kapi.ErrReplicaNotAvailable
	ErrInvalidUpdateVersion         = kapi.ErrInvalidUpdateVersion
	ErrReplicaNotAuthorized         = kapi.ErrReplicaNotAuthorized
	ErrMarkerNotAuthorized          = kapi.ErrMarkerNotAuthorized
	ErrTransactionCoordinatorFenced = kapi.ErrTransactionCoordinatorFenced
	ErrProducerFenced               = kapi.ErrProducerFenced
	ErrInvalidProducerIDMapping     = kapi.ErrInvalidProducerIDMapping
	ErrInvalidTxnState              = kapi.ErrInvalidTxnState
	ErrConcurrentTransactions       = kapi.ErrConcurrentTransactions
	ErrInvalidTransactionTimeout    = kapi.ErrInvalidTransactionTimeout
	ErrTransactionalIDNotFound      = kapi.ErrTransactionalIDNotFound
	ErrOperationNotAttempted        = kapi.ErrOperationNotAttempted
	ErrCoordinatorNotAvailable      = kapi.ErrCoordinatorNotAvailable
	ErrNotCoordinator               = kapi.ErrNotCoordinator
	ErrCoordinatorLoading           = kapi.ErrCoordinatorLoading
	ErrIllegalGeneration            = kapi.ErrIllegalGeneration
	ErrUnknownMemberID              = kapi.ErrUnknownMemberID
	ErrRebalanceInProgress          = kapi.ErrRebalanceInProgress
	ErrMemberIDRequired             = kapi.ErrMemberIDRequired
	ErrInconsistentGroupProtocol    = kapi.ErrInconsistentGroupProtocol
	ErrInvalidSessionTimeout        = kapi.ErrInvalidSessionTimeout
	ErrInvalidGroupID               = kapi.ErrInvalidGroupID
	ErrGroupIDNotFound              = kapi.ErrGroupIDNotFound
	ErrNonEmptyGroup                = kapi.ErrNonEmptyGroup
	ErrFencedInstanceID             = kapi.ErrFencedInstanceID
	ErrOffsetMetadataTooLarge       = kapi.ErrOffsetMetadataTooLarge
	ErrGroupSubscribedToTopic       = kapi.ErrGroupSubscribedToTopic
)
