package main

import (
	"github.com/runnel/runnel/api/rest"
	"github.com/spf13/pflag"
)

// addHTTPLimitFlags declares the HTTP listener's limits (hostile input:
// memory, concurrent requests, connections); README "Limits and
// protections" documents each.
func addHTTPLimitFlags(fs *pflag.FlagSet, l *rest.Limits) {
	def := rest.DefaultLimits
	fs.IntVar(&l.MaxProduceRecords, "http-max-produce-records", def.MaxProduceRecords, "records accepted in one HTTP produce request (413 above)")
	fs.Int64Var(&l.MemoryBudget, "http-memory-budget", def.MemoryBudget, "bytes of request bodies and response buffers all HTTP requests may hold at once (503 overloaded beyond)")
	fs.IntVar(&l.MaxLongPolls, "http-max-long-polls", def.MaxLongPolls, "concurrent waiting consumes (wait_ms > 0) and group polls on this node (429 beyond)")
	fs.IntVar(&l.MaxLongPollsPerClient, "http-max-long-polls-per-ip", def.MaxLongPollsPerClient, "concurrent waiting consumes and group polls from one IP address (429 beyond)")
	fs.IntVar(&l.MaxStreams, "http-max-streams", def.MaxStreams, "concurrent SSE streams on this node (429 beyond)")
	fs.IntVar(&l.MaxStreamsPerClient, "http-max-streams-per-ip", def.MaxStreamsPerClient, "concurrent SSE streams from one IP address (429 beyond)")
	fs.IntVar(&l.MaxConnections, "http-max-connections", def.MaxConnections, "open HTTP(S) connections on this node; more are answered 429 and closed")
	fs.IntVar(&l.MaxConnectionsPerClient, "http-max-connections-per-ip", def.MaxConnectionsPerClient, "open HTTP(S) connections from one IP address")
	fs.Int64Var(&l.MaxZstdWindow, "http-max-zstd-window", def.MaxZstdWindow, "bytes of window a zstd-compressed HTTP request body may declare (its decoder holds that much; 413 above)")
	fs.DurationVar(&l.WriteTimeout, "http-write-timeout", def.WriteTimeout, "a consume response (or one SSE write) not taken by the client in this time is dropped, freeing its memory")
}
