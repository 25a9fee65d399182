package main_test

import (
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// The reassign subcommand against one real node: a move to the replica set
// it has completes at once; bad targets and a cancel with nothing running
// are refused with the server's problem or before any request.
func TestCLIReassign(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}
	c.ok(nil, "topic", "create", "moves", "-p", "1", "-r", "1")

	out := c.ok(nil, "topic", "reassign", "moves", "-p", "0", "--replicas", "1", "--wait", "10s")
	if !strings.Contains(out, "REASSIGNMENT") || !strings.Contains(out, "done") {
		t.Fatalf("reassign printed %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "1,1"}, "listed twice"},
		{[]string{"--replicas", "x"}, "not a broker id"},
		{[]string{}, "--replicas is required"},
		{[]string{"--replicas", "1", "--cancel"}, "not both"},
		{[]string{"--replicas", "7"}, "400"},
		{[]string{"--cancel"}, "409"},
	} {
		args := append([]string{"topic", "reassign", "moves", "-p", "0"}, tc.args...)
		if _, errOut, err := c.run(nil, args...); err == nil || !strings.Contains(errOut, tc.want) {
			t.Errorf("runnel %s: err %v, stderr %q; want %q", strings.Join(args, " "), err, errOut, tc.want)
		}
	}
}
