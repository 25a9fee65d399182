package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientUpToDate regenerates the client from openapi.yaml with the pinned
// oapi-codegen and fails when the committed client.gen.go differs.
func TestClientUpToDate(t *testing.T) {
	cfg, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	tmpCfg := filepath.Join(dir, "config.yaml")
	patched := strings.Replace(string(cfg), "output: client.gen.go", "output: "+out, 1)
	if patched == string(cfg) {
		t.Fatal("config.yaml has no 'output: client.gen.go' line")
	}
	if err := os.WriteFile(tmpCfg, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", tmpCfg, filepath.Join("..", "..", "openapi.yaml"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("api/client/client.gen.go is stale: run `go generate ./api/client` and commit it")
	}
}
