//go:build !(linux || darwin || freebsd)

package raftfsm

// diskFree cannot measure the filesystem here: the state store's floor
// is not checked (ok false).
func diskFree(string) (free int64, ok bool, err error) { return 0, false, nil }
