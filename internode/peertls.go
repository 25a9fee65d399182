package internode

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Inter-node authentication: every connection on the raft port, accepted or
// dialled (Raft, controller RPC and Config.ExtraProtocols: replication,
// forwarded HTTP), is mutual TLS 1.3 right after its protocol byte. The
// protocol byte is bound into the handshake as the ALPN protocol
// "runnel-<byte>", so a connection authenticated for one protocol cannot be
// switched to another. Each node's certificate names it with the DNS SAN
// runnel-node-<id>; the node id a handshake proves is the one handlers see
// (VerifiedNodeID), so node 2 cannot speak as node 3, and a relay in the
// middle (e.g. an address an attacker got a node to dial) forwards bytes it
// can neither read nor change.
//
// Two ways to get certificates:
//   - PeerTLS files (--cluster-ca-file, --node-cert-file, --node-key-file;
//     `runnel certs create` writes them): per-node keys, so the id binding
//     is as strong as the CA's key is safe.
//   - ClusterSecret (--cluster-secret-file): the cluster CA's Ed25519 key is
//     derived from the secret with HKDF-SHA256, and each node signs itself a
//     fresh certificate at start. Outsiders without the secret are refused
//     and traffic is encrypted; but every holder of the secret can mint a
//     certificate for any id, so use certificate files where nodes must not
//     be able to impersonate each other.
//
// With neither, the port is plaintext and unauthenticated; Open refuses
// that unless the port is on loopback or Config.AllowInsecurePeers is set.

// PeerTLSFiles name a node's inter-node certificate material (PEM).
type PeerTLSFiles struct {
	CAFile   string // the cluster CA: peers' certificates must chain to it
	CertFile string // this node's certificate, SAN runnel-node-<id>
	KeyFile  string
}

func (f PeerTLSFiles) enabled() bool { return f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" }

// NodeCertName is the DNS SAN that binds a certificate to node id.
func NodeCertName(id int32) string { return "runnel-node-" + strconv.Itoa(int(id)) }

// nodeIDFromCert returns the one node id cert names (runnel-node-<id>).
func nodeIDFromCert(cert *x509.Certificate) (int32, error) {
	id := int32(-1)
	for _, name := range cert.DNSNames {
		rest, ok := strings.CutPrefix(name, "runnel-node-")
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(rest, 10, 32)
		if err != nil || v < 0 || strconv.Itoa(int(v)) != rest {
			return -1, fmt.Errorf("certificate names %q, not a node id", name)
		}
		if id >= 0 && int32(v) != id {
			return -1, errors.New("certificate names more than one node")
		}
		id = int32(v)
	}
	if id < 0 {
		return -1, errors.New("certificate names no node (no runnel-node-<id> DNS name)")
	}
	return id, nil
}

// Auth holds what the Mux and Dial need to run inter-node TLS. nil:
// plaintext.
type Auth struct {
	self  int32
	mode  string // "certificates" or "cluster secret", for logs
	roots *x509.CertPool
	cert  tls.Certificate
}

// ErrPeerAuth: an inter-node handshake failed (no or wrong certificate, a
// certificate for another node, another protocol).
var ErrPeerAuth = errors.New("internode: inter-node authentication failed")

// NewAuth returns node self's inter-node credentials: from certificate
// files, or derived from a cluster secret; nil (plaintext) with neither.
func NewAuth(self int32, secret []byte, files PeerTLSFiles) (*Auth, error) {
	switch {
	case files.enabled() && len(secret) > 0:
		return nil, errors.New("internode: give inter-node certificates or a cluster secret, not both")
	case files.enabled():
		return peerAuthFromFiles(self, files)
	case len(secret) > 0:
		return peerAuthFromSecret(self, secret)
	}
	return nil, nil
}

func peerAuthFromFiles(self int32, files PeerTLSFiles) (*Auth, error) {
	if files.CAFile == "" || files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("internode: inter-node TLS needs the cluster CA, the node certificate and its key (--cluster-ca-file, --node-cert-file, --node-key-file)")
	}
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("internode: read the cluster CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("internode: cluster CA file %s holds no PEM certificate", files.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("internode: load the node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("internode: parse the node certificate: %w", err)
	}
	id, err := nodeIDFromCert(leaf)
	if err != nil {
		return nil, fmt.Errorf("internode: node certificate %s: %w", files.CertFile, err)
	}
	if id != self {
		return nil, fmt.Errorf("internode: node certificate %s is for node %d, this is node %d", files.CertFile, id, self)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("internode: node certificate %s is not signed by the cluster CA %s: %w", files.CertFile, files.CAFile, err)
	}
	return &Auth{self: self, mode: "certificates", roots: roots, cert: cert}, nil
}

// derivedCAEpoch fixes the derived CA certificate's validity, so that every
// node derives the same certificate from the same secret.
var derivedCAEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func peerAuthFromSecret(self int32, secret []byte) (*Auth, error) {
	seed, err := hkdf.Key(sha256.New, secret, nil, "runnel inter-node CA v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("internode: derive the cluster CA: %w", err)
	}
	caKey := ed25519.NewKeyFromSeed(seed)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"runnel"}, CommonName: "runnel cluster CA (derived from the cluster secret)"},
		NotBefore:             derivedCAEpoch,
		NotAfter:              derivedCAEpoch.AddDate(200, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("internode: derive the cluster CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	der, key, err := IssueNodeCert(ca, caKey, self, nil, time.Now().AddDate(10, 0, 0))
	if err != nil {
		return nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &Auth{self: self, mode: "cluster secret", roots: roots, cert: cert}, nil
}

func alpnFor(proto byte) string { return "runnel-" + string([]byte{proto}) }

// verifyPeer checks a peer's chain against the cluster CA for usage and
// returns the node id it names; want >= 0 also requires that id.
func (a *Auth) verifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage, want int32) (int32, error) {
	if len(cs.PeerCertificates) == 0 {
		return -1, fmt.Errorf("%w: the peer sent no certificate", ErrPeerAuth)
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return -1, fmt.Errorf("%w: %v", ErrPeerAuth, err)
	}
	id, err := nodeIDFromCert(leaf)
	if err != nil {
		return -1, fmt.Errorf("%w: %v", ErrPeerAuth, err)
	}
	if want >= 0 && id != want {
		return -1, fmt.Errorf("%w: dialled node %d, the certificate is node %d's", ErrPeerAuth, want, id)
	}
	return id, nil
}

// server runs the accepting side of the handshake for proto.
func (a *Auth) server(ctx context.Context, conn net.Conn, proto byte) (*PeerConn, error) {
	var peer int32 = -1
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{a.cert},
		ClientAuth:   tls.RequireAnyClientCert,
		NextProtos:   []string{alpnFor(proto)},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.NegotiatedProtocol != alpnFor(proto) {
				return fmt.Errorf("%w: the peer did not ask for protocol %q", ErrPeerAuth, proto)
			}
			id, err := a.verifyPeer(cs, x509.ExtKeyUsageClientAuth, -1)
			peer = id
			return err
		},
	}
	tc := tls.Server(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return &PeerConn{Conn: tc, id: peer}, nil
}

// client runs the dialling side for proto; want is the node the caller
// means to reach (-1: any member, e.g. raft dialling by address).
func (a *Auth) client(ctx context.Context, conn net.Conn, proto byte, want int32) (*PeerConn, error) {
	var peer int32 = -1
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{a.cert},
		NextProtos:   []string{alpnFor(proto)},
		// The chain and the node name are checked in VerifyConnection
		// against the cluster CA (ServerName cannot express "any node").
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.NegotiatedProtocol != alpnFor(proto) {
				return fmt.Errorf("%w: the peer does not serve protocol %q", ErrPeerAuth, proto)
			}
			id, err := a.verifyPeer(cs, x509.ExtKeyUsageServerAuth, want)
			peer = id
			return err
		},
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return &PeerConn{Conn: tc, id: peer}, nil
}

// PeerConn is an authenticated inter-node connection: TLS, and the node id
// the peer's certificate proves.
type PeerConn struct {
	net.Conn
	id int32
}

// VerifiedNodeID is the node id the peer proved in the handshake.
func (c *PeerConn) VerifiedNodeID() int32 { return c.id }

// NewCA makes a self-signed cluster CA (ECDSA P-256) valid until notAfter;
// `runnel certs create` writes it out.
func NewCA(notAfter time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{"runnel"}, CommonName: "runnel cluster CA"},
		NotBefore:             time.Now().Add(-5 * time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// IssueNodeCert signs a certificate for node id with a fresh ECDSA P-256
// key: DNS SANs runnel-node-<id> (what inter-node TLS checks) and localhost,
// IP SANs 127.0.0.1 and ::1, plus hosts (names or IPs), for server and
// client authentication, valid until notAfter (capped at the CA's).
func IssueNodeCert(ca *x509.Certificate, caKey crypto.Signer, id int32, hosts []string, notAfter time.Time) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the key of node %d: %w", id, err)
	}
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{Organization: []string{"runnel"}, CommonName: NodeCertName(id)},
		NotBefore:    time.Now().Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{NodeCertName(id), "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the certificate of node %d: %w", id, err)
	}
	return der, key, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return n
}
