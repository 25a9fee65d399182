package server_test

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkNodeExitWritten measures one node whose every partition log was
// written (issue 19): SIGTERM to exit with one record in each, the time
// the node logged for closing them ("partition logs closed"), restart to
// ready, then one acks=all record to every partition twice: the first
// round opens each log (what a close leaves to the next open is paid
// there), the second writes to logs already open, its baseline. Then a
// second SIGTERM to exit, the logs holding two more records each.
// RUNNEL_BINARY selects the binary, so that two builds can be alternated
// in one window; RUNNEL_BENCH_LOGS names a directory for the node's logs.
//
// Size: RUNNEL_BENCH_PARTITIONS, else 2,000.
func BenchmarkNodeExitWritten(b *testing.B) {
	partitions := benchPartitions(b, 2000)
	perTopic := min(partitions, 1000)
	topics := partitions / perTopic
	limit := strconv.Itoa(2*partitions + 1000)
	node := servertest.Start(b, servertest.Options{Args: []string{
		"--max-partitions", limit, "--max-broker-partitions", limit,
	}})
	if dir := os.Getenv("RUNNEL_BENCH_LOGS"); dir != "" { // to see where the time went
		b.Cleanup(func() { os.WriteFile(dir+"/exit-node.log", []byte(node.Logs()), 0o644) })
	}
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("exit-%05d", i)
	}
	client := keepAliveClient(b, 4)
	parallel(b, topics, 4, func(i int) {
		scalePost(b, client, node.URL+"/v1/topics", fmt.Sprintf(`{"name":%q,"partitions":%d}`, names[i], perTopic), http.StatusCreated)
	})
	nodes := []*servertest.Node{node}
	report(b, float64(partitions), "partitions")
	report(b, produceEvery(b, nodes, names, perTopic, time.Now(), nil).Seconds(), "write-every-partition-s")
	b.Logf("load average before the first stop: %s", loadAverage())
	report(b, stopWithin(b, node, 15*time.Minute).Seconds(), "stop-s")
	report(b, logsClosedIn(b, node.Logs()), "logs-closed-s")
	report(b, timed(func() { node.StartNoWait(); node.WaitReady(10 * time.Minute) }).Seconds(), "restart-s")
	report(b, produceEvery(b, nodes, names, perTopic, time.Now(), nil).Seconds(), "first-write-after-restart-s")
	report(b, produceEvery(b, nodes, names, perTopic, time.Now(), nil).Seconds(), "second-write-after-restart-s")
	b.Logf("load average before the second stop: %s", loadAverage())
	report(b, stopWithin(b, node, 15*time.Minute).Seconds(), "second-stop-s")
	report(b, logsClosedIn(b, node.Logs()), "second-logs-closed-s")
}

// stopWithin sends SIGTERM and returns when the process has exited, or
// after limit (servertest's Stop kills it after 30 s: minutes before
// CloseAll at 20,000 written logs).
func stopWithin(b *testing.B, node *servertest.Node, limit time.Duration) time.Duration {
	start, pid := time.Now(), node.PID()
	node.Signal(syscall.SIGTERM)
	for time.Since(start) < limit && syscall.Kill(pid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	node.Stop() // exited: only servertest's own state is left to clear
	return took
}

var logsClosedLine = regexp.MustCompile(`partition logs closed.*took=([0-9.]+[a-zµ]+)`)

// logsClosedIn is the time the last "partition logs closed" line of a
// node's logs says closing took; 0 when there is none.
func logsClosedIn(b *testing.B, logs string) float64 {
	m := logsClosedLine.FindAllStringSubmatch(logs, -1)
	if len(m) == 0 {
		b.Logf("no %q line in the node's logs", "partition logs closed")
		return 0
	}
	d, err := time.ParseDuration(m[len(m)-1][1])
	if err != nil {
		b.Logf("partition logs closed: %v", err)
		return 0
	}
	return d.Seconds()
}
