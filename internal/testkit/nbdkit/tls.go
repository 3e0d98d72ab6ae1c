package nbdkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
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

func newCert(t testing.TB, cn string, ca *keyCert, isCA bool, usage x509.ExtKeyUsage) *keyCert {
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
		if ip := net.ParseIP(cn); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{cn}
		}
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

func writePair(t testing.TB, dir, name string, kc *keyCert) {
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

// TLSDirs makes a CA, a server certificate for host (a name or an IP
// address) and a client certificate, in nbdkit's and libnbd's layout:
// server (ca-cert.pem, server-cert.pem, server-key.pem, for nbdkit
// --tls-certificates), client (ca-cert.pem, client-cert.pem,
// client-key.pem, for a URI's tls-certificates=) and noCert (ca-cert.pem
// only: a client that trusts the server but has no certificate).
func TLSDirs(t testing.TB, host string) (server, client, noCert string) {
	t.Helper()
	ca := newCert(t, "mdtool test CA", nil, true, 0)
	srv := newCert(t, host, ca, false, x509.ExtKeyUsageServerAuth)
	cli := newCert(t, "client", ca, false, x509.ExtKeyUsageClientAuth)
	server, client, noCert = t.TempDir(), t.TempDir(), t.TempDir()
	writePair(t, server, "ca", ca)
	writePair(t, server, "server", srv)
	writePair(t, client, "ca", ca)
	writePair(t, client, "client", cli)
	writePair(t, noCert, "ca", ca)
	for _, d := range []string{server, client, noCert} {
		os.Remove(filepath.Join(d, "ca-key.pem"))
	}
	return server, client, noCert
}
