package raftfsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Badger layout of the state machine (one database, Dir/state):
//
//	meta/applied          8-byte big-endian: last applied raft index
//	meta/cluster_id       the cluster id
//	meta/next_producer_id 8-byte big-endian
//	meta/command_version  1 byte: the cluster's command version (absent: 1)
//	brokers/<id>          JSON Broker, id zero-padded to 10 digits
//	topics/<name>         Topic: JSON ('{'), or binary (topicbinary.go)
//	                      once the cluster's command version is 2
//	users/<name>          JSON User (SCRAM credentials, no password)
//	acls/<ACLEntry.Key>   JSON ACLEntry
//	tokens/<id>           JSON Token (a hash of the secret, never the token)
//	quotas/<QuotaEntity.Key> JSON Quota
const (
	keyApplied        = "meta/applied"
	keyClusterID      = "meta/cluster_id"
	keyNextProducerID = "meta/next_producer_id"
	keyCommandVersion = "meta/command_version"
	prefixBrokers     = "brokers/"
	prefixTopics      = "topics/"
)

func brokerKey(id int32) string   { return fmt.Sprintf("%s%010d", prefixBrokers, uint32(id)) }
func topicKey(name string) string { return prefixTopics + name }

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// write is one key change; a nil val deletes the key.
type write struct {
	key string
	val []byte
}

// loadImage reads the whole state into an image and returns it with the
// last applied index.
func loadImage(db *badger.DB) (*Image, uint64, error) {
	img := emptyImage()
	var applied uint64
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			err := item.Value(func(v []byte) error {
				return loadKey(img, &applied, string(item.Key()), v)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("raftfsm: load state: %w", err)
	}
	img.Index = applied
	img.changesFrom, img.tracked = applied, true
	img.load = scanLoad(img)
	return img, applied, nil
}

var errBadState = errors.New("raftfsm: corrupt state")

func loadKey(img *Image, applied *uint64, key string, v []byte) error {
	switch {
	case key == keyApplied || key == keyNextProducerID:
		if len(v) != 8 {
			return fmt.Errorf("%w: %s has %d bytes", errBadState, key, len(v))
		}
		if key == keyApplied {
			*applied = binary.BigEndian.Uint64(v)
		} else {
			img.NextProducerID = int64(binary.BigEndian.Uint64(v))
		}
	case key == keyClusterID:
		img.ClusterID = string(v)
	case key == keyCommandVersion:
		if len(v) != 1 {
			return fmt.Errorf("%w: %s has %d bytes", errBadState, key, len(v))
		}
		if v[0] > CommandVersion {
			// Written by a newer version: what else it wrote may be
			// in a form this one cannot read.
			return fmt.Errorf("%w: %s is %d, this node applies versions up to %d: upgrade it", errBadState, key, v[0], CommandVersion)
		}
		img.CommandVersion = v[0]
	case strings.HasPrefix(key, prefixBrokers):
		var b Broker
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.Brokers[b.ID] = &b
	case strings.HasPrefix(key, prefixTopics):
		t, err := decodeTopic(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.Topics = img.Topics.With(t)
	case strings.HasPrefix(key, prefixUsers):
		var u User
		if err := json.Unmarshal(v, &u); err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.Users[u.Name] = &u
	case strings.HasPrefix(key, prefixACLs):
		var a ACLEntry
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.ACLs[a.Key()] = a
	case strings.HasPrefix(key, prefixTokens):
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.Tokens[t.ID] = &t
	case strings.HasPrefix(key, prefixQuotas):
		var q Quota
		if err := json.Unmarshal(v, &q); err != nil {
			return fmt.Errorf("%w: %s: %v", errBadState, key, err)
		}
		img.Quotas[q.Entity.Key()] = q
	default:
		return fmt.Errorf("%w: unknown key %q", errBadState, key)
	}
	return nil
}

// commitWrites applies writes and the new applied index in one transaction.
func commitWrites(db *badger.DB, index uint64, writes []write) error {
	err := db.Update(func(txn *badger.Txn) error {
		for _, w := range writes {
			var err error
			if w.val == nil {
				err = txn.Delete([]byte(w.key))
			} else {
				err = txn.Set([]byte(w.key), w.val)
			}
			if err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyApplied), u64(index))
	})
	if err != nil {
		return fmt.Errorf("raftfsm: commit index %s: %w", strconv.FormatUint(index, 10), err)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("raftfsm: encode state: " + err.Error())
	}
	return b
}
