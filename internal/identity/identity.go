// Package identity manages a device's identity: an Ed25519 key, a
// self-signed X.509 certificate carrying it, and the device ID derived
// from the key. Peers trust each other by device ID alone, so the
// certificate is only a container for the key that TLS can present.
package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/peerfs/peerfs/internal/rootfs"
)

// File names inside an identity directory.
const (
	KeyFile  = "key.pem"
	CertFile = "cert.pem"
)

var (
	// ErrNoIdentity is returned by Load when the directory holds no key.
	ErrNoIdentity = errors.New("no device identity")
	// ErrExists is returned by Save when a key is already present.
	ErrExists = errors.New("device identity already exists")
)

// certLifetime is long because nothing checks it: trust rests on the key,
// and a certificate that expires would only break links for no gain.
const certLifetime = 20

// Identity is a device's key pair and certificate.
type Identity struct {
	ID   DeviceID
	Cert tls.Certificate // PrivateKey is an ed25519.PrivateKey
	Leaf *x509.Certificate
}

// Generate creates a new identity with a fresh Ed25519 key.
func Generate() (*Identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	// Random serial in [1, 2^128): positive as RFC 5280 requires.
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	serial, err := rand.Int(rand.Reader, limit.Sub(limit, big.NewInt(1)))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	serial.Add(serial, big.NewInt(1))

	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "peerfs"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between peers
		NotAfter:              now.AddDate(certLifetime, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	return assemble(priv, der)
}

func assemble(priv ed25519.PrivateKey, der []byte) (*Identity, error) {
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	id, err := DeviceIDFromCert(leaf)
	if err != nil {
		return nil, err
	}
	return &Identity{
		ID: id,
		Cert: tls.Certificate{
			Certificate: [][]byte{der},
			PrivateKey:  priv,
			Leaf:        leaf,
		},
		Leaf: leaf,
	}, nil
}

// Save writes key.pem and cert.pem into dir, creating dir with mode 0700
// if needed. It never overwrites an existing key: losing it would change
// the device ID and break every peer's trust in this device.
func (id *Identity) Save(dir string) error {
	priv, ok := id.Cert.PrivateKey.(ed25519.PrivateKey)
	if !ok {
		return fmt.Errorf("save identity: private key is %T, want ed25519.PrivateKey", id.Cert.PrivateKey)
	}
	if len(id.Cert.Certificate) == 0 {
		return errors.New("save identity: no certificate")
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("save identity: encode key: %w", err)
	}

	if err := ensureDir(dir); err != nil {
		return err
	}
	keyPath := filepath.Join(dir, KeyFile)
	if _, err := os.Lstat(keyPath); err == nil {
		return fmt.Errorf("%w in %s: refusing to overwrite %s; move it away first if you really want a new device ID", ErrExists, dir, keyPath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save identity: %w", err)
	}

	// The key goes last: its presence is what marks the identity as
	// complete, so an interrupted Save can simply be retried.
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.Cert.Certificate[0]})
	if err := rootfs.WriteFileAtomic(filepath.Join(dir, CertFile), certPEM); err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := rootfs.WriteFileAtomic(keyPath, keyPEM); err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	return nil
}

// Load reads the identity saved in dir by Save.
func Load(dir string) (*Identity, error) {
	keyPath := filepath.Join(dir, KeyFile)
	certPath := filepath.Join(dir, CertFile)

	fi, err := os.Stat(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: run \"peerfs init\" first", ErrNoIdentity, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("load identity: %w", err)
	}
	// Permission bits mean little on Windows; elsewhere a key others can
	// read is a key others may already have copied.
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("private key %s is accessible by other users (mode %04o): run \"chmod 600 %s\"", keyPath, fi.Mode().Perm(), keyPath)
	}

	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("load identity: %w", err)
	}
	priv, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load identity: %s: %w", keyPath, err)
	}

	certPEM, err := os.ReadFile(certPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load identity: %s exists but %s is missing: restore it from a backup of %s", keyPath, certPath, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("load identity: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("load identity: %s: no CERTIFICATE PEM block; restore it from a backup of %s", certPath, dir)
	}

	id, err := assemble(priv, block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load identity: %s: %w", certPath, err)
	}
	certPub := id.Leaf.PublicKey.(ed25519.PublicKey) // checked by assemble
	if !bytes.Equal(certPub, priv.Public().(ed25519.PublicKey)) {
		return nil, fmt.Errorf("load identity: %s does not belong to %s: restore both files from the same backup of %s", certPath, keyPath, dir)
	}
	return id, nil
}

func parseKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("no PRIVATE KEY PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key is %T, want Ed25519", key)
	}
	return priv, nil
}

// ensureDir creates dir with mode 0700 if it does not exist. An existing
// directory is left alone: it may be one the user chose on purpose.
func ensureDir(dir string) error {
	_, err := os.Stat(dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save identity: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	// MkdirAll is subject to the umask; make the mode exact.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	return nil
}
