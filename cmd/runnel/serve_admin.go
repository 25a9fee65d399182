package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/runnel/runnel/server"
)

// adminFlags are the Kafka admin surface's limits (issue 18): how long an
// admin call waits for every alive broker to apply its change.
type adminFlags struct {
	propagation time.Duration
}

func (a *adminFlags) register(fs *pflag.FlagSet, def server.Config) {
	fs.DurationVar(&a.propagation, "metadata-propagation-timeout", def.MetadataPropagationTimeout,
		"how long an admin change (topics, partitions, configs, ACLs, users) waits for every alive broker to apply it before the call returns; 0: return once the controller applied it")
}

func (a *adminFlags) apply(cfg *server.Config) error {
	if a.propagation < 0 {
		return fmt.Errorf("--metadata-propagation-timeout %v: want >= 0", a.propagation)
	}
	cfg.MetadataPropagationTimeout = a.propagation
	return nil
}
