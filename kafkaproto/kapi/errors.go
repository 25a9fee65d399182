package kapi

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors the Broker implementation wraps (fmt.Errorf("...: %w",
// kafkaproto.ErrX)) so the listener can answer with the Kafka error code in
// errorTable (groupErrorTable first for the group and transaction APIs).
// Any other error is sent as UNKNOWN_SERVER_ERROR.
var (
	ErrUnknownTopicOrPartition  = errors.New("kafkaproto: unknown topic or partition")
	ErrUnknownTopicID           = errors.New("kafkaproto: unknown topic id")
	ErrNotLeader                = errors.New("kafkaproto: not leader or follower")
	ErrLeaderNotAvailable       = errors.New("kafkaproto: leader not available")
	ErrNotController            = errors.New("kafkaproto: not controller")
	ErrRequestTimedOut          = errors.New("kafkaproto: request timed out")
	ErrMessageTooLarge          = errors.New("kafkaproto: message too large")
	ErrRecordListTooLarge       = errors.New("kafkaproto: record list too large")
	ErrCorruptMessage           = errors.New("kafkaproto: corrupt message")
	ErrInvalidRecord            = errors.New("kafkaproto: invalid record")
	ErrInvalidTimestamp         = errors.New("kafkaproto: invalid timestamp")
	ErrUnsupportedCompression   = errors.New("kafkaproto: unsupported compression type")
	ErrInvalidRequiredAcks      = errors.New("kafkaproto: invalid required acks")
	ErrInvalidTopic             = errors.New("kafkaproto: invalid topic")
	ErrTopicExists              = errors.New("kafkaproto: topic already exists")
	ErrInvalidPartitions        = errors.New("kafkaproto: invalid partitions")
	ErrInvalidReplicationFactor = errors.New("kafkaproto: invalid replication factor")
	ErrInvalidConfig            = errors.New("kafkaproto: invalid config")
	ErrInvalidRequest           = errors.New("kafkaproto: invalid request")
	ErrPolicyViolation          = errors.New("kafkaproto: policy violation")
	ErrOffsetOutOfRange         = errors.New("kafkaproto: offset out of range")
	ErrDuplicateSequence        = errors.New("kafkaproto: duplicate sequence number")
	ErrOutOfOrderSequence       = errors.New("kafkaproto: out of order sequence number")
	ErrInvalidProducerEpoch     = errors.New("kafkaproto: invalid producer epoch")
	ErrUnknownProducerID        = errors.New("kafkaproto: unknown producer id")
	ErrTransactionsUnsupported  = errors.New("kafkaproto: transactions not supported")
	ErrNotEnoughReplicas        = errors.New("kafkaproto: not enough replicas")
	ErrNotEnoughReplicasAfter   = errors.New("kafkaproto: not enough replicas after append")
	ErrFencedLeaderEpoch        = errors.New("kafkaproto: fenced leader epoch")
	ErrUnknownLeaderEpoch       = errors.New("kafkaproto: unknown leader epoch")
	ErrStorage                  = errors.New("kafkaproto: storage error")
	ErrReassignmentInProgress   = errors.New("kafkaproto: reassignment in progress")
	// Cluster admin (admin.go).
	ErrNoReassignmentInProgress    = errors.New("kafkaproto: no reassignment in progress")
	ErrInvalidReplicaAssignment    = errors.New("kafkaproto: invalid replica assignment")
	ErrElectionNotNeeded           = errors.New("kafkaproto: leader election not needed")
	ErrPreferredLeaderNotAvailable = errors.New("kafkaproto: preferred leader not available")
	ErrEligibleLeadersNotAvailable = errors.New("kafkaproto: eligible leaders not available")
	ErrLogDirNotFound              = errors.New("kafkaproto: log dir not found")
	ErrReplicaNotAvailable         = errors.New("kafkaproto: replica not available")
	ErrInvalidUpdateVersion        = errors.New("kafkaproto: invalid feature update") // updatefeatures.go
	// ErrReplicaNotAuthorized: a request acting as a follower replica
	// (ReplicaID >= 0) from a connection that may not: any client-port
	// connection, or a peer naming another broker than itself. Kafka
	// answers a follower fetch without ClusterAction permission with
	// TOPIC_AUTHORIZATION_FAILED in every partition, and so does runnel.
	ErrReplicaNotAuthorized = errors.New("kafkaproto: replica requests are accepted only from that broker on the inter-broker port")
	// Transaction markers (writetxnmarkers.go). ErrMarkerNotAuthorized:
	// WriteTxnMarkers from a client connection.
	ErrMarkerNotAuthorized          = errors.New("kafkaproto: transaction markers are accepted only from brokers on the inter-broker port")
	ErrTransactionCoordinatorFenced = errors.New("kafkaproto: transaction coordinator fenced")
)

// Transaction sentinels (their Kafka codes are in errorTable).
var (
	ErrProducerFenced            = errors.New("kafkaproto: producer fenced")
	ErrInvalidProducerIDMapping  = errors.New("kafkaproto: invalid producer id mapping")
	ErrInvalidTxnState           = errors.New("kafkaproto: invalid transaction state")
	ErrConcurrentTransactions    = errors.New("kafkaproto: concurrent transactions")
	ErrInvalidTransactionTimeout = errors.New("kafkaproto: invalid transaction timeout")
	ErrTransactionalIDNotFound   = errors.New("kafkaproto: transactional id not found")
	ErrOperationNotAttempted     = errors.New("kafkaproto: operation not attempted")
)

// TxnErr is GroupErr for the transaction APIs (their sentinels are in
// errorTable). Clients of request versions older than KIP-588 know
// INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED: legacy says which to answer.
func TxnErr(err error, legacy bool) int16 {
	if legacy && errors.Is(err, ErrProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return GroupErr(err)
}

// Group coordination sentinels, mapped to Kafka codes by GroupErr (groupErrorTable).
var (
	ErrCoordinatorNotAvailable   = errors.New("kafkaproto: coordinator not available")
	ErrNotCoordinator            = errors.New("kafkaproto: not coordinator")
	ErrCoordinatorLoading        = errors.New("kafkaproto: coordinator load in progress")
	ErrIllegalGeneration         = errors.New("kafkaproto: illegal generation")
	ErrUnknownMemberID           = errors.New("kafkaproto: unknown member id")
	ErrRebalanceInProgress       = errors.New("kafkaproto: rebalance in progress")
	ErrMemberIDRequired          = errors.New("kafkaproto: member id required")
	ErrInconsistentGroupProtocol = errors.New("kafkaproto: inconsistent group protocol")
	ErrInvalidSessionTimeout     = errors.New("kafkaproto: invalid session timeout")
	ErrInvalidGroupID            = errors.New("kafkaproto: invalid group id")
	ErrGroupIDNotFound           = errors.New("kafkaproto: group id not found")
	ErrNonEmptyGroup             = errors.New("kafkaproto: non-empty group")
	ErrFencedInstanceID          = errors.New("kafkaproto: fenced instance id")
	ErrOffsetMetadataTooLarge    = errors.New("kafkaproto: offset metadata too large")
	ErrGroupSubscribedToTopic    = errors.New("kafkaproto: group subscribed to topic")
)

var groupErrorTable = []errorCode{
	{ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{ErrNotCoordinator, kerr.NotCoordinator},
	{ErrCoordinatorLoading, kerr.CoordinatorLoadInProgress},
	{ErrIllegalGeneration, kerr.IllegalGeneration},
	{ErrUnknownMemberID, kerr.UnknownMemberID},
	{ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{ErrMemberIDRequired, kerr.MemberIDRequired},
	{ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{ErrInvalidGroupID, kerr.InvalidGroupID},
	{ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{ErrFencedInstanceID, kerr.FencedInstanceID},
	{ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
}

// GroupErr is KafkaErr with the group sentinels first: the code of the
// group and transaction APIs.
func GroupErr(err error) int16 {
	if err == nil {
		return 0
	}
	if code, ok := lookup(groupErrorTable, err); ok {
		return code
	}
	return KafkaErr(err)
}

// errorTable maps each sentinel to its Kafka error. It is the only place
// that does; KafkaErr walks it in order, so more specific errors come first.
var errorTable = []errorCode{
	{ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{ErrUnknownTopicID, kerr.UnknownTopicID},
	{ErrNotLeader, kerr.NotLeaderForPartition},
	{ErrLeaderNotAvailable, kerr.LeaderNotAvailable},
	{ErrNotController, kerr.NotController},
	{ErrRequestTimedOut, kerr.RequestTimedOut},
	{ErrMessageTooLarge, kerr.MessageTooLarge},
	{ErrRecordListTooLarge, kerr.RecordListTooLarge},
	{ErrCorruptMessage, kerr.CorruptMessage},
	{ErrInvalidRecord, kerr.InvalidRecord},
	{ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{ErrUnsupportedCompression, kerr.UnsupportedCompressionType},
	{ErrInvalidRequiredAcks, kerr.InvalidRequiredAcks},
	{ErrInvalidTopic, kerr.InvalidTopicException},
	{ErrTopicExists, kerr.TopicAlreadyExists},
	{ErrInvalidPartitions, kerr.InvalidPartitions},
	{ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{ErrInvalidConfig, kerr.InvalidConfig},
	{ErrInvalidRequest, kerr.InvalidRequest},
	{ErrPolicyViolation, kerr.PolicyViolation},
	{ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
	{ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{ErrUnknownProducerID, kerr.UnknownProducerID},
	{ErrTransactionsUnsupported, kerr.TransactionalIDAuthorizationFailed},
	{ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{ErrNotEnoughReplicasAfter, kerr.NotEnoughReplicasAfterAppend},
	{ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{ErrStorage, kerr.KafkaStorageError},
	{ErrReassignmentInProgress, kerr.ReassignmentInProgress},
	{ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{ErrLogDirNotFound, kerr.LogDirNotFound},
	{ErrReplicaNotAvailable, kerr.ReplicaNotAvailable},
	{ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
	{ErrReplicaNotAuthorized, kerr.TopicAuthorizationFailed},
	{ErrMarkerNotAuthorized, kerr.ClusterAuthorizationFailed},
	{ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	// Transaction coordinator (txn.go).
	{ErrProducerFenced, kerr.ProducerFenced},
	{ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{ErrInvalidTxnState, kerr.InvalidTxnState},
	{ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{ErrOperationNotAttempted, kerr.OperationNotAttempted},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
}

// KafkaErr returns the Kafka error code for err: 0 for nil, the table's code
// for a wrapped sentinel, UNKNOWN_SERVER_ERROR otherwise.
func KafkaErr(err error) int16 {
	if err == nil {
		return 0
	}
	if code, ok := lookup(errorTable, err); ok {
		return code
	}
	return kerr.UnknownServerError.Code
}

// errorCode pairs a sentinel with its Kafka error.
type errorCode struct {
	err  error
	code *kerr.Error
}

// lookup returns the code of the first entry of table that err wraps.
func lookup(table []errorCode, err error) (int16, bool) {
	for _, e := range table {
		if errors.Is(err, e.err) {
			return e.code.Code, true
		}
	}
	return 0, false
}

// ErrMessage returns the message to put in a response's ErrorMessage field:
// err's text without the "pkg: " prefixes Go errors carry inside the process
// (raftfsm: ..., kafkaproto: ...), as a client's error message names no
// internal package. A sentinel's message is made once (sentinelMessages)
// and shared: a produce of 100,000 partitions after a broker's failure can
// answer every partition with an error, and a regexp per partition was 5% of
// the node's CPU (issue 19). Callers do not modify the string pointed to.
func ErrMessage(err error) *string {
	if err == nil {
		return nil
	}
	if reflect.TypeOf(err) == sentinelType { // only then is err hashable for sure
		if m, ok := sentinelMessages[err]; ok {
			return m
		}
	}
	s := stripPackagePrefixes(err.Error())
	return &s
}

// sentinelType is the dynamic type of errors.New's errors, the sentinels'.
var sentinelType = reflect.TypeOf(errors.New(""))

// sentinelMessages is ErrMessage of every sentinel of the tables.
var sentinelMessages = func() map[error]*string {
	m := map[error]*string{}
	for _, table := range [][]errorCode{errorTable, groupErrorTable} {
		for _, e := range table {
			if reflect.TypeOf(e.err) == sentinelType {
				s := stripPackagePrefixes(e.err.Error())
				m[e.err] = &s
			}
		}
	}
	return m
}()

// packagePrefixes are the packages whose "name: " prefix ErrMessage removes
// wherever it begins a word.
var packagePrefixes = []string{"api", "raftfsm", "segments", "recordbatch", "kafkaproto", "server", "web"}

// stripPackagePrefixes removes from s every "pkg: " of packagePrefixes not
// preceded by a letter, digit or underscore. A message with prefixes only
// at its start costs no copy.
func stripPackagePrefixes(s string) string {
	var b strings.Builder
	copied := 0 // s[:copied] is in b, or removed
	for i := 0; ; {
		j := strings.Index(s[i:], ": ")
		if j < 0 {
			break
		}
		colon := i + j
		i = colon + 2
		word := colon
		for word > 0 && isWordByte(s[word-1]) {
			word--
		}
		if !slices.Contains(packagePrefixes, s[word:colon]) {
			continue
		}
		if word > copied || b.Len() > 0 {
			if b.Len() == 0 {
				b.Grow(len(s) - copied)
			}
			b.WriteString(s[copied:word])
		}
		copied = i
	}
	if b.Len() == 0 {
		return s[copied:]
	}
	b.WriteString(s[copied:])
	return b.String()
}

// isWordByte is regexp's \w: an ASCII letter, digit or underscore.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
