package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	id, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	leaf := id.Leaf
	if leaf == nil || id.Cert.Leaf != leaf {
		t.Fatal("Leaf not set")
	}
	if leaf.Subject.CommonName != "peerfs" {
		t.Errorf("CommonName = %q", leaf.Subject.CommonName)
	}
	if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v is not a positive 128-bit number", leaf.SerialNumber)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage = %v", leaf.KeyUsage)
	}
	wantEKU := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if len(leaf.ExtKeyUsage) != 2 || leaf.ExtKeyUsage[0] != wantEKU[0] || leaf.ExtKeyUsage[1] != wantEKU[1] {
		t.Errorf("ExtKeyUsage = %v, want %v", leaf.ExtKeyUsage, wantEKU)
	}
	if !leaf.BasicConstraintsValid || leaf.IsCA {
		t.Errorf("BasicConstraintsValid = %v, IsCA = %v", leaf.BasicConstraintsValid, leaf.IsCA)
	}
	now := time.Now()
	if !leaf.NotBefore.Before(now.Add(-50*time.Minute)) || leaf.NotAfter.Before(now.AddDate(19, 11, 0)) {
		t.Errorf("validity %v .. %v", leaf.NotBefore, leaf.NotAfter)
	}
	if err := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	priv, ok := id.Cert.PrivateKey.(ed25519.PrivateKey)
	if !ok {
		t.Fatalf("PrivateKey is %T", id.Cert.PrivateKey)
	}
	if id.ID != NewDeviceID(priv.Public().(ed25519.PublicKey)) {
		t.Error("ID does not match the private key")
	}

	other, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == id.ID || other.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("two identities share an ID or serial")
	}
}

func TestDeviceIDFromCert(t *testing.T) {
	id, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ec"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		cert    *x509.Certificate
		want    DeviceID
		wantErr error
	}{
		{"ed25519", id.Leaf, NewDeviceID(id.Cert.PrivateKey.(ed25519.PrivateKey).Public().(ed25519.PublicKey)), nil},
		{"ecdsa", ecCert, DeviceID{}, ErrNotEd25519},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DeviceIDFromCert(tt.cert)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("mode of %s = %04o, want %04o", path, got, want)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "id")
	id, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, KeyFile), 0o600)
	checkMode(t, filepath.Join(dir, CertFile), 0o600)

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want only key.pem and cert.pem (temp files left?)", len(entries))
	}

	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id.ID {
		t.Errorf("loaded ID %s, want %s", got.ID, id.ID)
	}
	if !bytes.Equal(got.Leaf.Raw, id.Leaf.Raw) || got.Cert.Leaf != got.Leaf {
		t.Error("loaded certificate differs")
	}
	if !got.Cert.PrivateKey.(ed25519.PrivateKey).Equal(id.Cert.PrivateKey) {
		t.Error("loaded key differs")
	}
}

func TestSaveRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	first, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	second, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := second.Save(dir); !errors.Is(err, ErrExists) {
		t.Fatalf("second Save err = %v, want ErrExists", err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != first.ID {
		t.Fatal("identity was overwritten")
	}
}

func TestLoadErrors(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr error  // nil: only check the text
		mention string // expected in the error text
		unix    bool   // relies on permission bits
	}{
		{
			name:    "missing dir",
			setup:   func(t *testing.T, dir string) { os.Remove(dir) },
			wantErr: ErrNoIdentity,
			mention: `run "peerfs init" first`,
		},
		{
			name:    "empty dir",
			setup:   func(t *testing.T, dir string) {},
			wantErr: ErrNoIdentity,
			mention: `run "peerfs init" first`,
		},
		{
			name: "key readable by others",
			setup: func(t *testing.T, dir string) {
				save(t, a, dir)
				if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			mention: "chmod 600",
			unix:    true,
		},
		{
			name: "key readable by group",
			setup: func(t *testing.T, dir string) {
				save(t, a, dir)
				if err := os.Chmod(filepath.Join(dir, KeyFile), 0o640); err != nil {
					t.Fatal(err)
				}
			},
			mention: "chmod 600",
			unix:    true,
		},
		{
			name: "cert missing",
			setup: func(t *testing.T, dir string) {
				save(t, a, dir)
				os.Remove(filepath.Join(dir, CertFile))
			},
			mention: "is missing",
		},
		{
			name: "cert from another identity",
			setup: func(t *testing.T, dir string) {
				save(t, a, dir)
				other := filepath.Join(t.TempDir(), "other")
				save(t, b, other)
				data, err := os.ReadFile(filepath.Join(other, CertFile))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, CertFile), data, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			mention: "does not belong to",
		},
		{
			name: "garbage key",
			setup: func(t *testing.T, dir string) {
				save(t, a, dir)
				if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("not a key"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			mention: "no PRIVATE KEY PEM block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.unix && runtime.GOOS == "windows" {
				t.Skip("permission bits are not meaningful on Windows")
			}
			dir := filepath.Join(t.TempDir(), "id")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

func save(t *testing.T, id *Identity, dir string) {
	t.Helper()
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
}
