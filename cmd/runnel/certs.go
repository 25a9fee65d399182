package main

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/internode"
)

// `runnel certs create` makes a private CA and one certificate per node, so a
// cluster can run TLS and inter-node mTLS without openssl. Everything is
// crypto/x509 from the standard library: ECDSA P-256 keys, SHA-256
// signatures.
//
// A node certificate serves both doors: clients see it on HTTPS and the Kafka
// SSL listener (server auth), and nodes present it to each other (client and
// server auth). Its SAN `runnel-node-<id>` binds the node id, which is what
// inter-node mTLS checks; localhost, 127.0.0.1, ::1 and --hosts make it
// usable by clients as well.

const (
	certsCAFile    = "ca.pem"
	certsCAKeyFile = "ca-key.pem"
)

// nodeCertName is the DNS SAN that binds a certificate to a node id.
func nodeCertName(id int) string { return internode.NodeCertName(int32(id)) }

func newCertsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a CA and node certificates for TLS and inter-node mTLS",
	}
	var (
		dir      string
		nodes    int
		hosts    []string
		validity time.Duration
		force    bool
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Write ca.pem, ca-key.pem and node-<id>.pem / node-<id>-key.pem for ids 1..N",
		Long: `Writes a private certificate authority (ca.pem, ca-key.pem) and, for each
node id 1..N, node-<id>.pem and node-<id>-key.pem. A node certificate is valid
for localhost, 127.0.0.1, ::1, the names given with --hosts, and
runnel-node-<id> (the name inter-node mTLS checks), for both server and client
authentication.

An existing CA in --dir is reused, so running the command again with a larger
--nodes adds certificates for the new nodes. Existing node files are kept
unless --force is given. Private keys are written with mode 0600; keep
ca-key.pem off the nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 || nodes > 1000 {
				return fmt.Errorf("--nodes must be between 1 and 1000, got %d", nodes)
			}
			if validity < time.Hour {
				return fmt.Errorf("--validity must be at least 1h, got %v", validity)
			}
			return createCerts(cmd.OutOrStdout(), dir, nodes, hosts, validity, force)
		},
	}
	create.Flags().StringVar(&dir, "dir", "certs", "directory to write the files to (created 0700)")
	create.Flags().IntVar(&nodes, "nodes", 1, "number of node certificates (ids 1..N)")
	create.Flags().StringSliceVar(&hosts, "hosts", nil, "extra host names or IP addresses the node certificates are valid for")
	create.Flags().DurationVar(&validity, "validity", 5*365*24*time.Hour, "how long the certificates are valid")
	create.Flags().BoolVar(&force, "force", false, "overwrite existing node certificates")
	cmd.AddCommand(create)
	return cmd
}

func createCerts(out io.Writer, dir string, nodes int, hosts []string, validity time.Duration, force bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ca, caKey, created, err := loadOrCreateCA(dir, validity)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(out, "wrote %s and %s\n", filepath.Join(dir, certsCAFile), filepath.Join(dir, certsCAKeyFile))
	} else {
		fmt.Fprintf(out, "using the existing CA in %s\n", filepath.Join(dir, certsCAFile))
	}
	for id := 1; id <= nodes; id++ {
		certPath := filepath.Join(dir, fmt.Sprintf("node-%d.pem", id))
		keyPath := filepath.Join(dir, fmt.Sprintf("node-%d-key.pem", id))
		if !force && fileExists(certPath) && fileExists(keyPath) {
			fmt.Fprintf(out, "kept %s (--force replaces it)\n", certPath)
			continue
		}
		certPEM, keyPEM, err := nodeCert(ca, caKey, id, hosts, validity)
		if err != nil {
			return err
		}
		if err := writeCertFile(keyPath, keyPEM, 0o600); err != nil {
			return err
		}
		if err := writeCertFile(certPath, certPEM, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s and %s (%s)\n", certPath, keyPath, nodeCertName(id))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func loadOrCreateCA(dir string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	certPath, keyPath := filepath.Join(dir, certsCAFile), filepath.Join(dir, certsCAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, key, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, nil, false, fmt.Errorf("existing CA in %s: %w", dir, err)
		}
		return ca, key, false, nil
	case certErr == nil || keyErr == nil:
		return nil, nil, false, fmt.Errorf("%s has only one of %s and %s: restore the other or remove it", dir, certsCAFile, certsCAKeyFile)
	case !errors.Is(certErr, fs.ErrNotExist) || !errors.Is(keyErr, fs.ErrNotExist):
		return nil, nil, false, fmt.Errorf("read the CA in %s: %w", dir, errors.Join(certErr, keyErr))
	}
	ca, key, err := internode.NewCA(time.Now().Add(validity))
	if err != nil {
		return nil, nil, false, err
	}
	der := ca.Raw
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writeCertFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, nil, false, err
	}
	if err := writeCertFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, false, err
	}
	return ca, key, true, nil
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CERTIFICATE block")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !ca.IsCA {
		return nil, nil, errors.New("the certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("no key block")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("the key does not belong to the certificate")
	}
	return ca, key, nil
}

func nodeCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, id int, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	der, key, err := internode.IssueNodeCert(ca, caKey, int32(id), hosts, time.Now().Add(validity))
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writeCertFile writes through a temporary file and a rename, so a crash
// never leaves half a key, and never widens an existing file's mode.
func writeCertFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
