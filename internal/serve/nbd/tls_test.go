package nbd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a CA and a server certificate for localhost made for a test.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	caPEM  []byte
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mdtool test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		pool:   pool,
		server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}

func (p testPKI) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
}

// startTLS sends NBD_OPT_STARTTLS and upgrades the client.
func (c *rawClient) startTLS(p testPKI) {
	c.t.Helper()
	c.expectOpt(optStartTLS, nil, repAck)
	if c.br.Buffered() != 0 {
		c.t.Fatal("server sent data after the STARTTLS ack")
	}
	tc := tls.Client(c.nc, &tls.Config{RootCAs: p.pool, ServerName: "localhost"})
	c.deadline()
	if err := tc.Handshake(); err != nil {
		c.t.Fatalf("TLS handshake: %v", err)
	}
	*c = *newRaw(c.t, tc)
}

func TestTLSRequired(t *testing.T) {
	p := newPKI(t)
	m := newMem(t, tSize, tMin, tPref, tMax)
	_, sock := startUnix(t, Config{TLS: p.serverConfig(), Exports: []Export{{Name: "x", Backend: m}}})
	fixed := uint32(clientFixedNewstyle | clientNoZeroes)

	t.Run("options refused before TLS", func(t *testing.T) {
		c := dialRaw(t, "unix", sock)
		c.hello()
		c.clientFlags(fixed)
		for _, opt := range []uint32{optList, optInfo, optGo, optStructuredReply, 99} {
			c.expectOpt(opt, infoData("x"), repErrTLSReqd)
		}
		c.expectOpt(optAbort, nil, repAck)
		c.expectClosed()
	})
	t.Run("export name before TLS", func(t *testing.T) {
		c := dialRaw(t, "unix", sock)
		c.hello()
		c.clientFlags(fixed)
		c.sendOpt(optExportName, []byte("x"))
		c.expectClosed()
	})
	t.Run("not fixed newstyle", func(t *testing.T) {
		c := dialRaw(t, "unix", sock)
		c.hello()
		c.clientFlags(0)
		c.expectClosed()
	})
	t.Run("failed handshake", func(t *testing.T) {
		c := dialRaw(t, "unix", sock)
		c.hello()
		c.clientFlags(fixed)
		c.expectOpt(optStartTLS, nil, repAck)
		c.write([]byte("this is not a TLS client hello\r\n"))
		c.expectClosed()
	})
	t.Run("transmission over TLS", func(t *testing.T) {
		c := dialRaw(t, "unix", sock)
		c.hello()
		c.clientFlags(fixed)
		c.expectOpt(optStartTLS, []byte{1}, repErrInvalid)
		c.startTLS(p)
		c.expectOpt(optStartTLS, nil, repErrInvalid)
		e := c.goTo("x", true, infoBlockSize)
		if e.size != tSize || e.min != tMin {
			t.Fatalf("info %+v", e)
		}
		data := pattern(tMax, 11)
		if r := c.do(cmdFlagFUA, cmdWrite, tMax, tMax, data); r.errno != 0 {
			t.Fatalf("write: errno %d", r.errno)
		}
		mustEqual(t, "read over TLS", c.do(0, cmdRead, tMax, tMax, nil).data, data)
		if r := c.do(0, cmdRead, tSize, tMin, nil); r.errno != errInval {
			t.Fatalf("bad read over TLS: errno %d", r.errno)
		}
		got := make([]byte, tMax)
		m.ReadAt(got, tMax)
		mustEqual(t, "backend", got, data)
		c.send(0, cmdDisc, 0, 0, 0, nil)
		c.expectClosed()
	})

}

func TestTLSOptional(t *testing.T) {
	p := newPKI(t)
	m := newMem(t, tSize, tMin, tPref, tMax)
	_, sock := startUnix(t, Config{TLS: p.serverConfig(), TLSOptional: true, Exports: []Export{{Backend: m}}})
	plain := dialRaw(t, "unix", sock)
	plain.start("", true, infoBlockSize)
	if r := plain.do(0, cmdRead, 0, tMin, nil); r.errno != 0 {
		t.Fatal(r.errno)
	}
	sec := dialRaw(t, "unix", sock)
	sec.hello()
	sec.clientFlags(clientFixedNewstyle)
	// Structured replies negotiated before STARTTLS are forgotten.
	sec.expectOpt(optStructuredReply, nil, repAck)
	sec.startTLS(p)
	sec.goTo("", false, infoBlockSize)
	if r := sec.do(0, cmdRead, 0, tMin, nil); !r.simple || r.errno != 0 || len(r.data) != tMin {
		t.Fatalf("want a simple reply, got %+v", r)
	}
}

// TestNbdinfoTLS connects libnbd to a TLS-only server over TCP and a unix
// socket, trusting the test CA through tls-certificates.
func TestNbdinfoTLS(t *testing.T) {
	requireBin(t, "nbdinfo")
	p := newPKI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca-cert.pem"), p.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	s, sock := startUnix(t, Config{TLS: p.serverConfig(), Exports: []Export{{Name: "x", Backend: newMem(t, tSize, tMin, tPref, tMax)}}})
	l, err := s.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	for _, uri := range []string{
		fmt.Sprintf("nbds://localhost:%s/x?tls-certificates=%s", port, dir),
		fmt.Sprintf("nbds+unix:///x?socket=%s&tls-certificates=%s", sock, dir),
	} {
		v := nbdinfo(t, uri)
		if !v.TLS || len(v.Exports) != 1 || v.Exports[0].Size != tSize || v.Exports[0].Min != tMin {
			t.Fatalf("%s: %+v", uri, v)
		}
	}
	// Without TLS the server refuses.
	if out, err := exec.Command("nbdinfo", fmt.Sprintf("nbd://localhost:%s/x", port)).CombinedOutput(); err == nil {
		t.Fatalf("plain nbdinfo against a TLS-only server succeeded:\n%s", out)
	}
}
