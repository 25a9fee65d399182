//go:build !(linux || darwin || freebsd)

package server

import "os"

// lockFile does not lock here (no flock): a second process on the same
// data dir is refused by badger's own lock on meta/state instead, later
// in its start.
func lockFile(*os.File) error { return nil }
