// Package certs makes a local certificate authority and the certificates it
// signs, as PEM files in the layout Kafka reads with ssl.keystore.type=PEM
// (one file: the private key, then the certificate chain) and
// ssl.truststore.type=PEM (one file of CA certificates).
//
// It serves tests and `millrace up` secure mode, which keep everything on one
// machine; a production deployment brings certificates from its own CA.
// Keys are ECDSA P-256: small, fast to make and accepted by every Kafka client.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside a CA directory.
const (
	// CAFile is the CA certificate: the truststore clients and brokers
	// verify peers with (ssl.truststore.location, tls.ca).
	CAFile = "ca.pem"
	// CAKeyFile is the CA's private key (mode 0600); whoever holds it can
	// issue certificates the cluster trusts.
	CAKeyFile = "ca-key.pem"
)

// DefaultValidity is how long certificates last unless Options say
// otherwise: long enough that a local deployment never meets an expiry.
const DefaultValidity = 10 * 365 * 24 * time.Hour

// CA is a certificate authority whose certificate and key live in a
// directory.
type CA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA returns the CA kept in dir: it loads ca.pem and ca-key.pem when both
// exist, so a data directory keeps its CA (and the certificates it issued
// stay valid) across restarts; otherwise it makes a new self-signed CA named
// name and writes both files, creating dir if needed.
func NewCA(dir, name string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		return loadCA(dir)
	case certErr == nil || keyErr == nil:
		// Making a new CA over half of an old one would silently
		// invalidate everything the old one signed.
		return nil, fmt.Errorf("certs: %s holds only one of %s and %s", dir, CAFile, CAKeyFile)
	}
	if name == "" {
		return nil, errors.New("certs: the CA needs a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between hosts
		NotAfter:              now.Add(DefaultValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	// The key first: a crash between the two writes leaves a key without a
	// certificate, which the check above refuses instead of reusing.
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certPath, encodeCert(der), 0o644); err != nil {
		return nil, err
	}
	return &CA{dir: dir, cert: cert, key: key}, nil
}

func loadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s holds no certificate", filepath.Join(dir, CAFile))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", filepath.Join(dir, CAFile), err)
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("certs: %s holds no PKCS#8 private key", filepath.Join(dir, CAKeyFile))
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("certs: %s is not the key of %s", filepath.Join(dir, CAKeyFile), filepath.Join(dir, CAFile))
	}
	return &CA{dir: dir, cert: cert, key: key}, nil
}

// CertFile is the path of the CA certificate, the PEM truststore peers
// verify certificates this CA issued with.
func (ca *CA) CertFile() string { return filepath.Join(ca.dir, CAFile) }

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Usage says what an issued certificate may authenticate.
type Usage int

const (
	// Server certificates authenticate a listener to its clients.
	Server Usage = 1 << iota
	// Client certificates authenticate a client to a listener that
	// asks for one (ssl.client.auth=requested|required).
	Client
)

// Options describe a certificate to issue.
type Options struct {
	// CommonName and Organization make the subject; an mTLS client's
	// Kafka principal is "User:" plus the subject, e.g. "User:CN=alice,O=acme".
	// CommonName is required; Organization may be empty.
	CommonName   string
	Organization string
	// DNSNames and IPs are the subject alternative names a server
	// certificate is valid for; clients check the host they dialled
	// against them. A server certificate needs at least one.
	DNSNames []string
	IPs      []net.IP
	// Usage is Server, Client or Server|Client (a broker presents one
	// certificate both to its clients and to the leaders it replicates
	// from). Zero means Server|Client.
	Usage Usage
	// Validity is how long the certificate lasts; zero means
	// DefaultValidity.
	Validity time.Duration
}

// Issue makes a key and a certificate signed by the CA and writes them to
// path (mode 0600) as Kafka's PEM keystore: the PKCS#8 private key, then the
// certificate, then the CA certificate. It returns the issued certificate.
func (ca *CA) Issue(path string, opts Options) (*x509.Certificate, error) {
	if opts.CommonName == "" {
		return nil, errors.New("certs: a certificate needs a common name")
	}
	usage := opts.Usage
	if usage == 0 {
		usage = Server | Client
	}
	if usage&^(Server|Client) != 0 {
		return nil, fmt.Errorf("certs: unknown usage %d", usage)
	}
	if usage&Server != 0 && len(opts.DNSNames) == 0 && len(opts.IPs) == 0 {
		return nil, errors.New("certs: a server certificate needs a DNS name or an IP address")
	}
	validity := opts.Validity
	if validity <= 0 {
		validity = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	subject := pkix.Name{CommonName: opts.CommonName}
	if opts.Organization != "" {
		subject.Organization = []string{opts.Organization}
	}
	var extUsage []x509.ExtKeyUsage
	if usage&Server != 0 {
		extUsage = append(extUsage, x509.ExtKeyUsageServerAuth)
	}
	if usage&Client != 0 {
		extUsage = append(extUsage, x509.ExtKeyUsageClientAuth)
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		// Verifiers reject a chain whose CA expires first anyway.
		notAfter = ca.cert.NotAfter
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  extUsage,
		DNSNames:     opts.DNSNames,
		IPAddresses:  opts.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	out := append(keyPEM, encodeCert(der)...)
	out = append(out, encodeCert(ca.cert.Raw)...)
	if err := writeFile(path, out, 0o600); err != nil {
		return nil, err
	}
	return cert, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return serial, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: key: %w", err)
	}
	// Unencrypted PKCS#8 is what Kafka reads when ssl.key.password is unset.
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// writeFile replaces path with data through a temporary file and a rename, so
// a reader never sees half a key and a crash never leaves one.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	name := tmp.Name()
	err = tmp.Chmod(mode)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}
