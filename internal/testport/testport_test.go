package testport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A port handed to one test process is not handed to another while the
// first lives, even though nothing listens on it yet: the window between
// the check and a node's listen is where parallel test processes collided.
func TestPortNotHandedToAnotherProcess(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		t.Skip("ports are claimed across processes only where flock(2) is")
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestHelperHoldPort$")
	child.Env = append(os.Environ(), "TESTPORT_HOLD=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); child.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's port: %v", err)
	}
	held, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "port ")))
	if err != nil {
		t.Fatalf("child said %q", line)
	}

	// This process would hand out the child's port next.
	ports.mu.Lock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	ports.next = held
	ports.mu.Unlock()
	_, got, _ := net.SplitHostPort(FreeAddr(t))
	if got == strconv.Itoa(held) {
		t.Fatalf("port %d handed out here while another test process holds it", held)
	}
}

// TestHelperHoldPort is the child of TestPortNotHandedToAnotherProcess: it
// takes a port, says which, and lives until its stdin closes.
func TestHelperHoldPort(t *testing.T) {
	if os.Getenv("TESTPORT_HOLD") == "" {
		t.Skip("run by TestPortNotHandedToAnotherProcess")
	}
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	fmt.Printf("port %s\n", port)
	io.Copy(io.Discard, os.Stdin)
}
