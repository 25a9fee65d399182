package server_test

import (
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// TestDataDirPermissions: what a node writes under its data dir is readable
// by its own user only (directories 0700, files 0600), so other local users
// cannot read the records.
func TestDataDirPermissions(t *testing.T) {
	n := servertest.Start(t, servertest.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	c := newAPIClient(t, n)
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "perms", "partitions": 1}, http.StatusCreated, nil)
	c.json(http.MethodPost, "/v1/topics/perms/records", map[string]any{"records": []any{map[string]any{"value": 1}}}, http.StatusOK, nil)
	n.Stop() // a clean stop writes the index files and the clean checkpoint
	var files int
	err := filepath.WalkDir(n.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.DataDir, path)
		if strings.HasPrefix(rel, filepath.Join("meta", "snapshots", "snapshots")+string(filepath.Separator)) {
			return nil // raft's snapshot store, inside a 0700 directory
		}
		if d.IsDir() {
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("directory %s has mode %v, want 0700", rel, fi.Mode().Perm())
			}
			return nil
		}
		if strings.HasPrefix(rel, "meta"+string(filepath.Separator)) {
			return nil // badger's own files, inside a 0700 directory
		}
		files++
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file %s has mode %v, want 0600", rel, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 4 {
		t.Fatalf("only %d files checked under %s", files, n.DataDir)
	}
}
