package cmd

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"mdtool/internal/daemon"
)

// TestTLSFlagsFailClosed: TLS flags that would leave NBD unprotected are
// usage errors (exit 2, one line) before anything is opened.
func TestTLSFlagsFailClosed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--nbd-listen", "127.0.0.1:0", "--tls-ca", "ca.pem"}, "--tls-ca needs --tls-cert and --tls-key"},
		{[]string{"--tls-ca", "ca.pem"}, "--tls-ca needs --tls-cert and --tls-key"},
		{[]string{"--nbd-listen", "127.0.0.1:0", "--tls-cert", "c.pem"}, "--tls-cert needs --tls-key"},
		{[]string{"--nbd-listen", "127.0.0.1:0", "--tls-key", "k.pem", "--tls-ca", "ca.pem"}, "--tls-key needs --tls-cert"},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--tls-cert and --tls-key need --nbd-listen"},
		{[]string{"--nbd-max-memory", "lots"}, "bad --nbd-max-memory"},
		{[]string{"--nbd-max-clients", "0"}, "--nbd-max-clients must be at least 1"},
	} {
		args := append([]string{"assemble", "--foreground", "--run-dir", filepath.Join(dir, "run"), "/dev/md/x"}, tc.args...)
		args = append(args, filepath.Join(dir, "missing.img"))
		code, out, errs := mdtool(t, args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "mdtool: "+tc.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line %q", tc.args, code, out, errs, "mdtool: "+tc.msg)
		}
	}
	// create checks the limits it passes to its daemon before writing.
	img := sparse(t, dir, "c.img", 32<<20)
	code, _, errs := mdtool(t, "create", "/dev/md/c", "--run", "-l1", "-n2", img, "missing", "--nbd-idle-timeout=-1s")
	if code != 2 || !strings.Contains(errs, "--nbd-idle-timeout must not be negative") {
		t.Errorf("create with a negative idle timeout: exit %d: %s", code, errs)
	}
}

// TestNBDLimitFlagsConfig: the limits come from MDTOOL_* like the other
// serving flags (and are checked the same way), and create passes the
// values that differ from the defaults to the assemble it starts.
func TestNBDLimitFlagsConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MDTOOL_NBD_MAX_CLIENTS", "0")
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", filepath.Join(dir, "run"), "/dev/md/x", filepath.Join(dir, "missing.img"))
	if code != 2 || errs != "mdtool: --nbd-max-clients must be at least 1\n" {
		t.Errorf("MDTOOL_NBD_MAX_CLIENTS=0: exit %d: %q", code, errs)
	}
	t.Setenv("MDTOOL_NBD_MAX_CLIENTS", "")
	var s serveOptions
	f := pflag.NewFlagSet("create", pflag.ContinueOnError)
	addNBDLimitFlags(f, &s)
	if got := nbdLimitArgs(f); len(got) != 0 {
		t.Errorf("defaults passed on: %q", got)
	}
	f.Set("nbd-max-memory", "1G")
	f.Lookup("nbd-idle-timeout").Value.Set("30s") // as applyConfig sets it
	got := strings.Join(nbdLimitArgs(f), " ")
	if got != "--nbd-max-memory=1G --nbd-idle-timeout=30s" {
		t.Errorf("create passes %q", got)
	}
	n, mem, idle, err := s.nbdLimits()
	if err != nil || n != 64 || mem != 1<<30 || idle != 30*time.Second {
		t.Errorf("limits %d %d %v %v", n, mem, idle, err)
	}
	f.Set("nbd-idle-timeout", "0")
	if _, _, idle, _ := s.nbdLimits(); idle >= 0 {
		t.Errorf("--nbd-idle-timeout=0 gives %v, want never (negative)", idle)
	}
}

// TestNBDPlaintextWarning: plaintext NBD on an address that is not
// loopback prints one warning line; on loopback none.
func TestNBDPlaintextWarning(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/warn", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	const warn = "mdtool: warning: NBD on 0.0.0.0:0 is served without TLS: anyone who reaches it can read and write the array"
	s := serve(t, runDir, "/dev/md/warn", append([]string{"--nbd-listen", "0.0.0.0:0"}, devs...)...)
	if errs := s.stderr.String(); strings.Count(errs, warn) != 1 {
		t.Errorf("stderr lacks one warning %q:\n%s", warn, errs)
	}
	s.stop()
	s = serve(t, runDir, "/dev/md/warn", append([]string{"--nbd-listen", "127.0.0.1:0"}, devs...)...)
	if errs := s.stderr.String(); strings.Contains(errs, "warning") {
		t.Errorf("warning on loopback:\n%s", errs)
	}
	s.stop()
}

// pkiFiles are the files of a test PKI: the server's, and directories in
// the layout of libnbd's tls-certificates= (ca-cert.pem, client-cert.pem,
// client-key.pem).
type pkiFiles struct {
	ca, serverCert, serverKey string
	clientDir                 string // a client certificate signed by the CA
	noCertDir                 string // the CA only: no client certificate
	otherCADir                string // a client certificate signed by another CA
}

func writeClientPKI(t *testing.T, dir string) pkiFiles {
	t.Helper()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := x509.ParseCertificate(der)
		return ca, key, der
	}
	leaf := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		return der, keyDER
	}
	write := func(path, typ string, b []byte) {
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca, caKey, caDER := newCA("mdtool test CA")
	other, otherKey, _ := newCA("another CA")
	p := pkiFiles{ca: filepath.Join(dir, "ca-cert.pem"), serverCert: filepath.Join(dir, "server-cert.pem"),
		serverKey: filepath.Join(dir, "server-key.pem"), clientDir: filepath.Join(dir, "client"),
		noCertDir: filepath.Join(dir, "nocert"), otherCADir: filepath.Join(dir, "other")}
	write(p.ca, "CERTIFICATE", caDER)
	der, key := leaf(ca, caKey, 2, "localhost", x509.ExtKeyUsageServerAuth)
	write(p.serverCert, "CERTIFICATE", der)
	write(p.serverKey, "PRIVATE KEY", key)
	der, key = leaf(ca, caKey, 3, "good client", x509.ExtKeyUsageClientAuth)
	write(filepath.Join(p.clientDir, "client-cert.pem"), "CERTIFICATE", der)
	write(filepath.Join(p.clientDir, "client-key.pem"), "PRIVATE KEY", key)
	der, key = leaf(other, otherKey, 4, "stranger", x509.ExtKeyUsageClientAuth)
	write(filepath.Join(p.otherCADir, "client-cert.pem"), "CERTIFICATE", der)
	write(filepath.Join(p.otherCADir, "client-key.pem"), "PRIVATE KEY", key)
	for _, d := range []string{p.clientDir, p.noCertDir, p.otherCADir} {
		write(filepath.Join(d, "ca-cert.pem"), "CERTIFICATE", caDER)
	}
	return p
}

// TestNBDClientCertificates: with --tls-ca, libnbd's nbdinfo and nbdcopy
// with a client certificate signed by that CA read and write the array;
// without a certificate, or with one of another CA, they are refused.
func TestNBDClientCertificates(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	p := writeClientPKI(t, filepath.Join(dir, "pki"))
	devs := mkArray(t, dir, "/dev/md/mtls", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/mtls", append([]string{"--nbd-listen", "127.0.0.1:0",
		"--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-ca", p.ca}, devs...)...)
	st, err := queryStatus(runDir, "mtls")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(st.NBDListen)
	uri := func(certs string) string { return "nbds://localhost:" + port + "/?tls-certificates=" + certs }
	out := run(t, "nbdinfo", uri(p.clientDir))
	if !strings.Contains(out, "with TLS") || !strings.Contains(out, fmt.Sprintf("export-size: %d", st.Size)) {
		t.Errorf("nbdinfo with a client certificate:\n%s", out)
	}
	data := nbdWrite(t, uri(p.clientDir), 4<<20)
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Errorf("data written over TLS differs on the unix socket")
	}
	if got := nbdRead(t, uri(p.clientDir), len(data)); !bytes.Equal(got, data) {
		t.Errorf("data read over TLS with a client certificate differs")
	}
	for _, d := range []string{p.noCertDir, p.otherCADir} {
		if out, err := execCommand("nbdinfo", uri(d)); err == nil {
			t.Errorf("nbdinfo with %s succeeded:\n%s", filepath.Base(d), out)
		}
		dst := filepath.Join(dir, "refused")
		if out, err := execCommand("nbdcopy", "--", uri(d), dst); err == nil {
			t.Errorf("nbdcopy with %s succeeded:\n%s", filepath.Base(d), out)
		}
	}
	s.stop()
}

// rawNBD is a minimal NBD client (fixed newstyle, NBD_OPT_EXPORT_NAME,
// simple replies) for tests that misbehave on purpose.
type rawNBD struct {
	nc   net.Conn
	br   *bufio.Reader
	size uint64
}

const (
	nbdMagic       = 0x4e42444d41474943 // NBDMAGIC
	nbdOptMagic    = 0x49484156454F5054 // IHAVEOPT
	nbdReqMagic    = 0x25609513
	nbdSimpleMagic = 0x67446698
)

// nbdHello dials sock and reads the greeting; it reports whether the
// server greeted (false: closed at once).
func nbdHello(sock string) (*rawNBD, bool, error) {
	nc, err := net.DialTimeout("unix", sock, 60*time.Second)
	if err != nil {
		return nil, false, err
	}
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	c := &rawNBD{nc: nc, br: bufio.NewReader(nc)}
	var h [18]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		nc.Close()
		if isTimeout(err) {
			return nil, false, err
		}
		return nil, false, nil
	}
	if binary.BigEndian.Uint64(h[:]) != nbdMagic || binary.BigEndian.Uint64(h[8:]) != nbdOptMagic {
		nc.Close()
		return nil, false, fmt.Errorf("bad greeting % x", h)
	}
	return c, true, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialNBD connects and selects the default export.
func dialNBD(sock string) (*rawNBD, error) {
	c, ok, err := nbdHello(sock)
	if err != nil || !ok {
		return nil, fmt.Errorf("no greeting: %v", err)
	}
	b := binary.BigEndian.AppendUint32(nil, 3) // fixed newstyle, no zeroes
	b = binary.BigEndian.AppendUint64(b, nbdOptMagic)
	b = binary.BigEndian.AppendUint32(b, 1) // NBD_OPT_EXPORT_NAME
	b = binary.BigEndian.AppendUint32(b, 0)
	if _, err := c.nc.Write(b); err != nil {
		c.nc.Close()
		return nil, err
	}
	var e [10]byte
	if _, err := io.ReadFull(c.br, e[:]); err != nil {
		c.nc.Close()
		return nil, err
	}
	c.size = binary.BigEndian.Uint64(e[:])
	c.nc.SetDeadline(time.Time{})
	return c, nil
}

func nbdRequest(typ uint16, cookie, off uint64, length uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, nbdReqMagic)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, off)
	return binary.BigEndian.AppendUint32(b, length)
}

// do sends one READ (typ 0) or WRITE (typ 1) and waits for its reply.
func (c *rawNBD) do(typ uint16, off uint64, p []byte) error {
	c.nc.SetDeadline(time.Now().Add(120 * time.Second))
	defer c.nc.SetDeadline(time.Time{})
	req := nbdRequest(typ, off, off, uint32(len(p)))
	if typ == 1 {
		req = append(req, p...)
	}
	if _, err := c.nc.Write(req); err != nil {
		return err
	}
	var h [16]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return err
	}
	if m, e, ck := binary.BigEndian.Uint32(h[:]), binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:]); m != nbdSimpleMagic || e != 0 || ck != off {
		return fmt.Errorf("reply magic %#x errno %d cookie %d", m, e, ck)
	}
	if typ == 0 {
		_, err := io.ReadFull(c.br, p)
		return err
	}
	return nil
}

// procStatus reads a field (in KiB) of /proc/PID/status.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// TestNBDHostileClientsRSS runs the real daemon with --nbd-max-memory=64M
// --nbd-max-clients=48 and a short idle timeout against clients that
// pipeline 64 READs of 32 MiB and never read the replies, 500 connections
// at once, and clients that do nothing: the daemon's peak RSS stays under
// the documented bound (twice --nbd-max-memory plus 1 MiB per client, plus
// 100 MiB), a well-behaved client is served
// correctly throughout, connections over the limit are closed at once and
// the idle ones are dropped.
func TestNBDHostileClientsRSS(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/hostile", 2, 96<<20, "-l0", "-n2")
	env := append(os.Environ(), "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	runBin := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	const budgetMiB, maxClients = 64, 48
	code, out := runBin(append([]string{"-A", "/dev/md/hostile", "--nbd-max-memory=64M", "--nbd-max-clients=48",
		"--nbd-idle-timeout=2s"}, devs...)...)
	if code != 0 {
		t.Fatalf("assemble: exit %d: %s", code, out)
	}
	t.Cleanup(func() { runBin("stop", "/dev/md/hostile") })
	st, err := queryStatus(runDir, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	pid := st.PID
	sock := daemon.PathsFor(runDir, "hostile").NBD()
	logPath := daemon.PathsFor(runDir, "hostile").Log()
	baseRSS := procStatus(pid, "VmRSS")

	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v := procStatus(pid, "VmRSS"); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	good, err := dialNBD(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer good.nc.Close()
	var idle []*rawNBD
	for i := 0; i < 8; i++ {
		c, err := dialNBD(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.nc.Close()
		idle = append(idle, c)
	}
	size := good.size
	const readLen = 32 << 20
	// Without the shared budget these would hold 12 x 32 MiB (one
	// request each, half the budget per connection) or more.
	for i := 0; i < 12; i++ {
		c, err := dialNBD(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.nc.Close()
		var b []byte
		for k := uint64(0); k < 64; k++ {
			off := (k * 7 << 20) % (size - readLen) &^ 4095
			b = append(b, nbdRequest(0, k, off, readLen)...)
		}
		if _, err := c.nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	// The well-behaved client, while 500 more connections arrive.
	goodErr := make(chan error, 1)
	go func() {
		for i := 0; i < 16; i++ {
			p := make([]byte, 1<<20)
			rand.Read(p)
			off := uint64(i) << 20
			if err := good.do(1, off, p); err != nil {
				goodErr <- fmt.Errorf("write %d: %v", i, err)
				return
			}
			q := make([]byte, len(p))
			if err := good.do(0, off, q); err != nil {
				goodErr <- fmt.Errorf("read %d: %v", i, err)
				return
			}
			if !bytes.Equal(p, q) {
				goodErr <- fmt.Errorf("read %d: data differs from what was written", i)
				return
			}
		}
		goodErr <- nil
	}()
	var greeted, refused int
	var flood []*rawNBD
	for i := 0; i < 500; i++ {
		c, ok, err := nbdHello(sock)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if ok {
			greeted++
			flood = append(flood, c)
		} else {
			refused++
		}
	}
	for _, c := range flood {
		c.nc.Close()
	}
	if greeted > maxClients-1 || refused < 500-(maxClients-1) {
		t.Errorf("of 500 connections %d were served and %d refused; the limit is %d (the good client stays connected)", greeted, refused, maxClients)
	}
	if err := <-goodErr; err != nil {
		t.Fatalf("well-behaved client: %v", err)
	}
	for i, c := range idle {
		c.nc.SetReadDeadline(time.Now().Add(120 * time.Second))
		if _, err := c.br.ReadByte(); err == nil || isTimeout(err) {
			t.Errorf("idle client %d: not dropped (%v)", i, err)
		}
	}
	// Every hostile client is dropped in turn: those waiting for the
	// budget hold none and are not idle until their reply write blocks.
	deadline := time.Now().Add(180 * time.Second)
	for {
		logText, _ := os.ReadFile(logPath)
		if strings.Count(string(logText), `reason="a reply write blocked"`) >= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every hostile client was dropped:\n%s", logText)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopSampling)
	<-sampled
	hwm := procStatus(pid, "VmHWM")
	boundKiB := int64(2*(budgetMiB+maxClients)+100) << 10
	t.Logf("daemon RSS: %d KiB at start, peak sampled %d KiB, VmHWM %d KiB (bound %d KiB); %d connections served, %d refused",
		baseRSS, peak.Load(), hwm, boundKiB, greeted, refused)
	if hwm <= 0 || hwm > boundKiB || peak.Load() > boundKiB {
		t.Errorf("daemon peak RSS %d KiB (sampled %d KiB) over the bound %d KiB", hwm, peak.Load(), boundKiB)
	}
	logText, _ := os.ReadFile(logPath)
	for _, want := range []string{"nbd: connection limit reached: connection refused", "nbd: idle connection dropped",
		`reason="a reply write blocked"`, `reason="no request and no reply"`} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("daemon log lacks %q:\n%s", want, logText)
		}
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the daemon died")
	}
}
