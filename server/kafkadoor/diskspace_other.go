//go:build !(linux || darwin || freebsd)

package kafkadoor

// diskSpace cannot measure a filesystem here: DescribeLogDirs answers -1
// for both sizes.
func diskSpace(string) (total, free int64, ok bool) { return 0, 0, false }
