package raftfsm

import (
	"fmt"
)

// Bounds on what a command may ask for. Two layers:
//
//   - The hard bounds below are checked by the FSM itself on every command it
//     applies (checkCommand), whatever the node's configuration: the log is
//     input like any other (a command can arrive through the controller RPC
//     from anyone holding the cluster secret, or from an older version), so
//     a name that is not a legal topic name or a count that would drive a
//     huge allocation is refused at apply, deterministically on every node.
//   - Limits (quorum.Config.Limits, operator flags) are checked by the active
//     controller before it proposes (quorum's prepare), against its newest image plus
//     what it has in flight, so concurrent requests cannot overshoot them.
//     They are not re-checked at apply: nodes may be configured differently,
//     and apply must not depend on configuration.
const (
	// HardMaxPartitionsPerTopic bounds any topic's partition count.
	HardMaxPartitionsPerTopic = 1_000_000
	// HardMaxReplicationFactor bounds any replication factor.
	HardMaxReplicationFactor = 64
	// MaxTopicConfigs bounds the configs one command sets or deletes.
	MaxTopicConfigs = 1000
	// maxConfigNameLen and maxConfigValueLen bound one topic config.
	maxConfigNameLen  = 255
	maxConfigValueLen = 32 << 10
	// MaxAddrLen bounds a registered broker's addresses and rack, and a
	// voter's address.
	MaxAddrLen = 1024
	// maxProducerIDBlock bounds one AllocateProducerIDs.
	maxProducerIDBlock = 1 << 20
	// maxTopicNameLen is Kafka's: a partition directory name (topic, '-',
	// partition) must fit the 255 bytes of a file name.
	maxTopicNameLen = 249
)

// Limits bound the partitions and replicas the active controller lets a
// CreateTopic or CreatePartitions ask for (zero: only the hard bounds).
type Limits struct {
	// MaxPartitionsPerTopic bounds a topic's partition count.
	MaxPartitionsPerTopic int32
	// MaxReplicationFactor bounds a topic's replication factor (it is also
	// never more than the alive brokers).
	MaxReplicationFactor int16
	// MaxPartitions bounds the partitions of all topics together.
	MaxPartitions int64
	// MaxBrokerPartitions bounds the partition replicas placed on one broker.
	MaxBrokerPartitions int64
}

func (l Limits) perTopic() int32 {
	if l.MaxPartitionsPerTopic <= 0 || l.MaxPartitionsPerTopic > HardMaxPartitionsPerTopic {
		return HardMaxPartitionsPerTopic
	}
	return l.MaxPartitionsPerTopic
}

func (l Limits) replicationFactor() int16 {
	if l.MaxReplicationFactor <= 0 || l.MaxReplicationFactor > HardMaxReplicationFactor {
		return HardMaxReplicationFactor
	}
	return l.MaxReplicationFactor
}

// CheckTopic checks a topic's partition count and replication factor
// against the limits (and the hard bounds): ErrInvalidPartitions or
// ErrInvalidReplicationFactor. The front doors call it to answer early;
// the active controller checks again before proposing.
func (l Limits) CheckTopic(partitions int32, rf int16) error {
	if partitions < 1 || partitions > l.perTopic() {
		return fmt.Errorf("%w: %d partitions (want 1 to %d)", ErrInvalidPartitions, partitions, l.perTopic())
	}
	if rf < 1 || rf > l.replicationFactor() {
		return fmt.Errorf("%w: %d (want 1 to %d)", ErrInvalidReplicationFactor, rf, l.replicationFactor())
	}
	return nil
}

// ValidateTopicName applies Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], not "." or "..". Such a name is also a safe file name,
// which is why the FSM refuses any other (ErrInvalidTopicName).
func ValidateTopicName(name string) error {
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopicName, name)
	}
	if len(name) == 0 || len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %d characters (want 1 to %d)", ErrInvalidTopicName, len(name), maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q (want [a-zA-Z0-9._-] only)", ErrInvalidTopicName, name)
		}
	}
	return nil
}

// checkCommand is the FSM's own check of a decoded command against the hard
// bounds: the same rules the front doors apply, so nothing in the log can
// name a file outside the data dir or drive an unbounded allocation. The
// handlers then check it against the state (existence, epochs, brokers).
func checkCommand(cmd *Command) error {
	switch {
	case cmd.CreateTopic != nil:
		ct := cmd.CreateTopic
		if err := ValidateTopicName(ct.Name); err != nil {
			return err
		}
		if err := (Limits{}).CheckTopic(ct.Partitions, ct.ReplicationFactor); err != nil {
			return err
		}
		return checkConfigs(ct.Configs, nil)
	case cmd.DeleteTopic != nil:
		return checkNameLen(cmd.DeleteTopic.Name)
	case cmd.AlterConfigs != nil:
		if err := checkNameLen(cmd.AlterConfigs.Topic); err != nil {
			return err
		}
		if err := checkConfigs(cmd.AlterConfigs.Set, cmd.AlterConfigs.Delete); err != nil {
			return err
		}
		return checkListOps(cmd.AlterConfigs)
	case cmd.CreatePartitions != nil:
		cp := cmd.CreatePartitions
		if cp.Count < 1 || cp.Count > HardMaxPartitionsPerTopic {
			return fmt.Errorf("%w: %d partitions (want 1 to %d)", ErrInvalidPartitions, cp.Count, HardMaxPartitionsPerTopic)
		}
		return checkNameLen(cp.Topic)
	case cmd.RegisterBroker != nil:
		rb := cmd.RegisterBroker
		if rb.ID < 0 {
			return fmt.Errorf("%w: broker id %d", ErrInvalidCommand, rb.ID)
		}
		for _, s := range []string{rb.IncarnationID, rb.Rack, rb.HTTPAddr, rb.KafkaAddr, rb.RaftAddr} {
			if len(s) > MaxAddrLen {
				return fmt.Errorf("%w: broker %d: a field of %d bytes (at most %d)", ErrInvalidCommand, rb.ID, len(s), MaxAddrLen)
			}
		}
	case cmd.UpsertUserScram != nil:
		return checkUpsertUser(cmd.UpsertUserScram)
	case cmd.DeleteUser != nil:
		return checkUserName(cmd.DeleteUser.Name)
	case cmd.CreateToken != nil:
		return checkCreateToken(cmd.CreateToken)
	case cmd.DeleteToken != nil:
		return checkTokenID(cmd.DeleteToken.ID)
	case cmd.CreateACLs != nil:
		return checkACLs(cmd.CreateACLs.ACLs)
	case cmd.DeleteACLs != nil:
		return checkACLs(cmd.DeleteACLs.ACLs)
	case cmd.SetQuotas != nil:
		return checkQuotas(cmd.SetQuotas.Quotas)
	case cmd.SetCommandVersion != nil:
		v := cmd.SetCommandVersion.Version
		if int(v) > CommandVersion {
			return unsupported(int(v))
		}
		if v < MinCommandVersion {
			return fmt.Errorf("%w: command version %d", ErrInvalidCommand, v)
		}
	case cmd.ChangePartitionsBatch != nil:
		for _, t := range cmd.ChangePartitionsBatch.Topics {
			if err := checkNameLen(t.Topic); err != nil {
				return err
			}
		}
	case cmd.AllocateProducerIDs != nil:
		if n := cmd.AllocateProducerIDs.Count; n < 1 || n > maxProducerIDBlock {
			return fmt.Errorf("%w: producer id count %d (want 1 to %d)", ErrInvalidCommand, n, maxProducerIDBlock)
		}
	}
	return nil
}

// checkNameLen: a command naming an existing topic needs no more than a
// bounded name (the topic must exist, so it was checked when created).
func checkNameLen(name string) error {
	if len(name) == 0 || len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %d characters (want 1 to %d)", ErrInvalidTopicName, len(name), maxTopicNameLen)
	}
	return nil
}

// checkListOps bounds AlterConfigs.ListOps: with Set and Delete at most
// MaxTopicConfigs changes, each op's values no longer together than a
// config value.
func checkListOps(ac *AlterConfigs) error {
	if n := len(ac.Set) + len(ac.Delete) + len(ac.ListOps); n > MaxTopicConfigs {
		return fmt.Errorf("%w: %d config changes (at most %d)", ErrInvalidCommand, n, MaxTopicConfigs)
	}
	for _, op := range ac.ListOps {
		size := len(op.Default)
		for _, v := range op.Values {
			size += len(v) + 1
		}
		if len(op.Name) == 0 || len(op.Name) > maxConfigNameLen || size > 2*maxConfigValueLen || len(op.Values) > maxConfigValueLen {
			return fmt.Errorf("%w: list config op on %.64q: name of %d bytes, values of %d (at most %d and %d)",
				ErrInvalidCommand, op.Name, len(op.Name), size, maxConfigNameLen, 2*maxConfigValueLen)
		}
	}
	return nil
}

func checkConfigs(set map[string]string, del []string) error {
	if n := len(set) + len(del); n > MaxTopicConfigs {
		return fmt.Errorf("%w: %d configs (at most %d)", ErrInvalidCommand, n, MaxTopicConfigs)
	}
	for k, v := range set {
		if len(k) == 0 || len(k) > maxConfigNameLen || len(v) > maxConfigValueLen {
			return fmt.Errorf("%w: config %.64q of %d bytes, value of %d (at most %d and %d)",
				ErrInvalidCommand, k, len(k), len(v), maxConfigNameLen, maxConfigValueLen)
		}
	}
	for _, k := range del {
		if len(k) == 0 || len(k) > maxConfigNameLen {
			return fmt.Errorf("%w: config name of %d bytes (at most %d)", ErrInvalidCommand, len(k), maxConfigNameLen)
		}
	}
	return nil
}

// ImageLoad counts the partitions in img and the replicas on each broker
// (kept up to date in every image the FSM publishes, so it costs no scan).
func ImageLoad(img *Image) (int64, map[int32]int64) {
	l := img.partitionLoad()
	return l.partitions, l.replicas
}
