package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/runnel/runnel/server"
)

// groupFlags are the consumer group limits (issue 18): the session
// timeouts a member may ask for (Kafka's group.min/max.session.timeout.ms).
type groupFlags struct {
	minSession time.Duration
	maxSession time.Duration
}

func (g *groupFlags) register(fs *pflag.FlagSet, def server.Config) {
	fs.DurationVar(&g.minSession, "group-min-session-timeout", def.GroupMinSessionTimeout, "shortest session timeout a consumer group member may ask for (Kafka INVALID_SESSION_TIMEOUT, HTTP 400 below it)")
	fs.DurationVar(&g.maxSession, "group-max-session-timeout", def.GroupMaxSessionTimeout, "longest session timeout a consumer group member may ask for")
}

func (g *groupFlags) apply(cfg *server.Config) error {
	if g.minSession <= 0 || g.maxSession < g.minSession {
		return fmt.Errorf("--group-min-session-timeout %v, --group-max-session-timeout %v: want 0 < min <= max", g.minSession, g.maxSession)
	}
	cfg.GroupMinSessionTimeout, cfg.GroupMaxSessionTimeout = g.minSession, g.maxSession
	return nil
}
