package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/runnel/runnel/server"
)

// txnFlags are the transaction coordinator's settings (issue 16): Kafka's
// transaction.max.timeout.ms, transactional.id.expiration.ms and
// transaction.state.log.num.partitions.
type txnFlags struct {
	maxTimeout time.Duration
	expiration time.Duration
	partitions int32
}

func (t *txnFlags) register(fs *pflag.FlagSet, def server.Config) {
	fs.DurationVar(&t.maxTimeout, "transaction-max-timeout", def.TransactionMaxTimeout, "longest transaction timeout a transactional producer may ask for (Kafka INVALID_TRANSACTION_TIMEOUT above it)")
	fs.DurationVar(&t.expiration, "transactional-id-expiration", def.TransactionalIDExpiration, "a transactional id with no transaction for this long is forgotten")
	fs.Int32Var(&t.partitions, "transaction-state-partitions", 0, "partitions of __transaction_state when it is first created (0: 3)")
}

func (t *txnFlags) apply(cfg *server.Config) error {
	if t.maxTimeout <= 0 || t.expiration <= 0 || t.partitions < 0 {
		return fmt.Errorf("--transaction-max-timeout %v, --transactional-id-expiration %v, --transaction-state-partitions %d: want positive durations and a count >= 0",
			t.maxTimeout, t.expiration, t.partitions)
	}
	cfg.TransactionMaxTimeout, cfg.TransactionalIDExpiration, cfg.TransactionStatePartitions = t.maxTimeout, t.expiration, t.partitions
	return nil
}
