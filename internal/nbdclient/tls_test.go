package nbdclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type keyCert struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	der  []byte
}

func newCert(t *testing.T, cn string, ca *keyCert, isCA bool, usage x509.ExtKeyUsage) *keyCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  isCA,
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.DNSNames = []string{cn}
	}
	parent, pkey := tmpl, key
	if ca != nil {
		parent, pkey = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, pkey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &keyCert{key: key, cert: c, der: der}
}

func writePair(t *testing.T, dir, name string, kc *keyCert) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+"-cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kc.der}), 0o644); err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(kc.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// nbds+unix with client certificates: a client with a certificate signed
// by the server's CA gets in, one without is refused by the server.
func TestTLSClientCertificates(t *testing.T) {
	ca := newCert(t, "mdtool test CA", nil, true, 0)
	srv := newCert(t, "localhost", ca, false, x509.ExtKeyUsageServerAuth)
	cli := newCert(t, "client", ca, false, x509.ExtKeyUsageClientAuth)
	sdir, cdir, nocert := t.TempDir(), t.TempDir(), t.TempDir()
	writePair(t, sdir, "ca", ca)
	writePair(t, sdir, "server", srv)
	writePair(t, cdir, "ca", ca)
	writePair(t, cdir, "client", cli)
	writePair(t, nocert, "ca", ca)
	os.Remove(filepath.Join(nocert, "ca-key.pem"))

	base, _ := startNbdkit(t, "nbds+unix", "--tls=require", "--tls-certificates="+sdir, "--tls-verify-peer", "memory", "size=16M")
	c := dial(t, base+"&tls-certificates="+url.QueryEscape(cdir), Options{})
	want := []byte("over TLS, certified")
	buf := make([]byte, 4096)
	copy(buf, want)
	if _, err := c.WriteAt(buf, 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if _, err := c.ReadAt(got, 8192); err != nil || string(got[:len(want)]) != string(want) {
		t.Fatalf("read back %q, %v", got[:len(want)], err)
	}

	for name, uri := range map[string]string{
		"no client certificate": base + "&tls-certificates=" + url.QueryEscape(nocert),
		"plain nbd":             "nbd+unix" + base[len("nbds+unix"):],
	} {
		u, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c2, err := Dial(ctx, u, Options{})
		cancel()
		if err == nil {
			// TLS 1.3 reports a refused client certificate on first use.
			_, err = c2.ReadAt(got, 0)
			c2.Close()
		}
		if err == nil {
			t.Fatalf("%s: the server let the client in", name)
		}
		t.Logf("%s: refused: %v", name, err)
	}
}
