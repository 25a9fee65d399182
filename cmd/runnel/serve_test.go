package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flag on the command line > RUNNEL_* environment > config file > default.
func TestServeConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "runnel.yaml")
	os.WriteFile(file, []byte("data-dir: /from/file\nhttp-addr: :1111\nkafka-addr: :2222\nnode-id: 7\n"), 0o644)
	t.Setenv("RUNNEL_HTTP_ADDR", ":3333")
	t.Setenv("RUNNEL_ROLES", "broker")

	cmd := newServeCommand()
	if err := cmd.ParseFlags([]string{"--config", file, "--kafka-addr", ":4444"}); err != nil {
		t.Fatal(err)
	}
	fs := cmd.Flags()
	if err := applyEnvAndFile(fs, file); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"data-dir":   "/from/file", // file only
		"http-addr":  ":3333",      // env beats file
		"kafka-addr": ":4444",      // flag beats file
		"node-id":    "7",
		"roles":      "broker",
		"raft-addr":  "127.0.0.1:9093", // default
	} {
		if got := fs.Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}

func TestServeConfigFileRejectsUnknownKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "runnel.yaml")
	os.WriteFile(file, []byte("data-dri: /typo\n"), 0o644)
	cmd := newServeCommand()
	if err := applyEnvAndFile(cmd.Flags(), file); err == nil {
		t.Fatal("a misspelt key was accepted")
	}
}

func TestServeFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--roles", "witness"},
		{"--controllers", "1@nohostport"},
		{"--controllers", "x@127.0.0.1:1"},
		{"--log-level", "loud"},
	} {
		// Each fails while building the config, before anything listens.
		root := newRootCommand()
		root.SetArgs(append([]string{"serve"}, args...))
		if err := root.Execute(); err == nil {
			t.Errorf("runnel serve %v: no error", args)
		}
	}
}

// The hidden --test-raft-log-segment-bytes takes 0 (the default) or a
// size between 4 KiB and 1 GiB: raft-wal preallocates each segment, so
// any int went straight to the disk (a terabyte, or a segment smaller
// than its own header).
func TestServeRaftLogSegmentBytesBounded(t *testing.T) {
	for value, ok := range map[string]bool{
		"0": true, "4096": true, "32768": true, "1073741824": true,
		"-1": false, "1": false, "4095": false, "1073741825": false, "1099511627776": false,
	} {
		cmd, f := serveCommand()
		if err := cmd.ParseFlags([]string{"--test-raft-log-segment-bytes", value}); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config()
		if ok && (err != nil || fmt.Sprint(cfg.TestFaults.RaftLogSegmentBytes) != value) {
			t.Errorf("--test-raft-log-segment-bytes %s: %v, segment bytes %d; want it taken", value, err, cfg.TestFaults.RaftLogSegmentBytes)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "--test-raft-log-segment-bytes")) {
			t.Errorf("--test-raft-log-segment-bytes %s: %v; want an error naming the flag", value, err)
		}
	}
}
