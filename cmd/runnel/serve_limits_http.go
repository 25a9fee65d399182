package main

import (
	"github.com/spf13/pflag"

	"github.com/runnel/runnel/api"
)

// addHTTPLimitFlags declares the HTTP listener's limits (hostile input:
// memory, concurrent requests, connections); README "Limits and
// protections" documents each.
func addHTTPLimitFlags(fs *pflag.FlagSet, l *api.Limits) {
	def := api.DefaultLimits
	fs.IntVar(&l.MaxProduceRecords, "http-max-produce-records", def.MaxProduceRecords, "records accepted in one HTTP produce request (413 above)")
}
