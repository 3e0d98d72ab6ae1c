package cmd

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mdtool/internal/daemon"
	fiobench "mdtool/internal/nbdbench"
)

// The end-to-end tests of the daemon: arrays created by mdtool create on
// sparse files, assembled by mdtool assemble and used through their
// exports by fio, libnbd's tools, the loop driver and ext4.

// arraySize asks the daemon for the array size in bytes.
func arraySize(t *testing.T, runDir, name string) int64 {
	t.Helper()
	st, err := queryStatus(runDir, name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size
}

// TestFioVerifyNBD runs fio (ioengine=nbd, verify=crc32c) with 4 jobs at
// iodepth 32, random and sequential, on every level.
func TestFioVerifyNBD(t *testing.T) {
	levels := []struct {
		name string
		n    int
		opts []string
	}{
		{"raid0", 4, []string{"-l0", "-n4", "-c", "64"}},
		{"raid1", 2, []string{"-l1", "-n2", "--assume-clean"}},
		{"raid5", 4, []string{"-l5", "-n4", "-c", "64", "--assume-clean"}},
		{"raid6", 5, []string{"-l6", "-n5", "-c", "64", "--assume-clean"}},
		{"raid10", 4, []string{"-l10", "-n4", "-c", "64", "--assume-clean"}},
		{"raid5-bitmap", 3, []string{"-l5", "-n3", "-c", "128", "--bitmap=internal", "--bitmap-chunk=1M", "--assume-clean"}},
	}
	for _, lv := range levels {
		t.Run(lv.name, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			md := "/dev/md/" + lv.name
			devs := mkArray(t, dir, md, lv.n, 48<<20, lv.opts...)
			s := serve(t, runDir, md, devs...)
			size := arraySize(t, runDir, s.name)
			per := size / 4 / (1 << 20) * (1 << 20)
			if per > 16<<20 {
				per = 16 << 20
			}
			jobs := []fiobench.Job{
				{Name: "randwrite-verify", RW: "randwrite", BS: "4k", IODepth: 32, NumJobs: 4, Size: per},
				{Name: "write-verify", RW: "write", BS: "320k", IODepth: 32, NumJobs: 4, Size: per},
				{Name: "randrw-verify", RW: "randrw", BS: "16k", IODepth: 32, NumJobs: 4, Size: per},
			}
			for _, j := range jobs {
				// Each job covers [i*Size, (i+1)*Size): a size that is not a
				// multiple of the block size would spill into the next job.
				bs, _ := strconv.ParseInt(strings.TrimSuffix(j.BS, "k"), 10, 64)
				j.Size = j.Size / (bs << 10) * (bs << 10)
				j.Extra = []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				res, out, err := fiobench.Run(ctx, s.nbdURI(), j)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v\n%s", j.Name, err, out)
				}
				if strings.Contains(out, "verify:") || strings.Contains(out, "bad magic") {
					t.Errorf("%s: fio reports verify problems:\n%s", j.Name, out)
				}
				if res.ReadBytes == 0 || res.WriteBytes == 0 {
					t.Errorf("%s: fio wrote %d and verified %d bytes", j.Name, res.WriteBytes, res.ReadBytes)
				}
			}
			s.stop()
		})
	}
}

// TestNBDInfoAndCopy checks what nbdinfo sees and copies 64 MiB of random
// data in and out with nbdcopy, over the unix socket and over TCP.
func TestNBDInfoAndCopy(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/copy", 4, 32<<20, "-l5", "-n4", "--assume-clean")
	s := serve(t, runDir, "/dev/md/copy", "--nbd-listen", "127.0.0.1:0", devs[0], devs[1], devs[2], devs[3])
	st, err := queryStatus(runDir, "copy")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Exports []struct {
			Size      int64 `json:"export-size"`
			Min       int64 `json:"block_size_minimum"`
			Preferred int64 `json:"block_size_preferred"`
			Max       int64 `json:"block_size_maximum"`
			CanFlush  bool  `json:"can_flush"`
			CanFUA    bool  `json:"can_fua"`
			CanTrim   bool  `json:"can_trim"`
			MultiConn bool  `json:"can_multi_conn"`
			ReadOnly  bool  `json:"is_read_only"`
			Desc      string
		} `json:"exports"`
	}
	out := run(t, "nbdinfo", "--json", s.nbdURI())
	if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Exports) != 1 {
		t.Fatalf("nbdinfo: %v\n%s", err, out)
	}
	e := info.Exports[0]
	// 4 x 32 MiB raid5: 3 data members x (32 MiB - 2 MiB data offset).
	if e.Size != st.Size || e.Size != 3*30<<20 {
		t.Errorf("export size %d, array %d", e.Size, st.Size)
	}
	// 512-byte sectors, 1.5 MiB stripes advertised as 2 MiB.
	if e.Min != 512 || e.Preferred != 2<<20 || e.Max < e.Preferred || !e.CanFlush || !e.CanFUA || !e.CanTrim || !e.MultiConn || e.ReadOnly {
		t.Errorf("nbdinfo: %+v", e)
	}
	code, text, _ := mdtool(t, "detail", "--run-dir", runDir, "/dev/md/copy")
	if code != 0 || !strings.Contains(text, fmt.Sprintf("        Array Size : %d ", st.Size>>10)) ||
		!strings.Contains(text, "        NBD Socket : "+daemon.PathsFor(runDir, "copy").NBD()+"\n") ||
		!strings.Contains(text, "           NBD TCP : "+st.NBDListen+"\n") {
		t.Errorf("detail:\n%s", text)
	}

	data := make([]byte, 64<<20)
	rand.Read(data)
	src := filepath.Join(dir, "in")
	os.WriteFile(src, data, 0o600)
	run(t, "nbdcopy", "--", src, s.nbdURI())
	for _, uri := range []string{s.nbdURI(), "nbd://" + st.NBDListen} {
		dst := filepath.Join(dir, "out")
		os.Remove(dst)
		run(t, "nbdcopy", "--", uri, dst)
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != int(st.Size) || !bytes.Equal(got[:len(data)], data) {
			t.Errorf("%s: read back %d bytes, first 64 MiB equal: %v", uri, len(got), bytes.Equal(got[:min(len(got), len(data))], data))
		}
	}
	s.stop()

	// After a stop and a new assembly the data is still there.
	s = serve(t, runDir, "/dev/md/copy", devs...)
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Errorf("data changed across stop/assemble")
	}
	s.stop()
}

// TestNBDTLS serves NBD over TCP with TLS and reads it with nbdinfo and
// nbdcopy using a CA made by the test.
func TestNBDTLS(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	certDir := filepath.Join(dir, "pki")
	os.MkdirAll(certDir, 0o700)
	writeTestPKI(t, certDir)
	devs := mkArray(t, dir, "/dev/md/tls", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	args := []string{"--nbd-listen", "127.0.0.1:0", "--tls-cert", filepath.Join(certDir, "server-cert.pem"),
		"--tls-key", filepath.Join(certDir, "server-key.pem"), devs[0], devs[1]}
	s := serve(t, runDir, "/dev/md/tls", args...)
	st, err := queryStatus(runDir, "tls")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(st.NBDListen)
	uri := "nbds://localhost:" + port + "/?tls-certificates=" + certDir
	out := run(t, "nbdinfo", uri)
	if !strings.Contains(out, "with TLS") || !strings.Contains(out, fmt.Sprintf("export-size: %d", st.Size)) {
		t.Errorf("nbdinfo over TLS:\n%s", out)
	}
	// Plain NBD on the TLS port is refused.
	if out, err := execCommand("nbdinfo", "nbd://localhost:"+port); err == nil {
		t.Errorf("nbdinfo without TLS succeeded:\n%s", out)
	}
	data := nbdWrite(t, uri, 4<<20)
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Errorf("data written over TLS differs when read over the unix socket")
	}
	s.stop()
}

// writeTestPKI writes ca-cert.pem, server-cert.pem and server-key.pem (for
// localhost and 127.0.0.1) into dir, the layout libnbd's
// tls-certificates= expects.
func writeTestPKI(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mdtool test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca-cert.pem", "CERTIFICATE", caDER)
	write("server-cert.pem", "CERTIFICATE", der)
	write("server-key.pem", "PRIVATE KEY", keyDER)
}

// TestFUSELoopExt4 puts ext4 on the FUSE file of an array through a loop
// device, checks it, stops and re-assembles the array and finds the files.
func TestFUSELoopExt4(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	fuseDir := filepath.Join(dir, "fuse")
	mnt := filepath.Join(dir, "mnt")
	os.MkdirAll(fuseDir, 0o755)
	os.MkdirAll(mnt, 0o755)
	devs := mkArray(t, dir, "/dev/md/fs", 4, 48<<20, "-l5", "-n4", "-c", "64", "--bitmap=internal", "--bitmap-chunk=1M", "--assume-clean")
	args := append([]string{"--fuse", fuseDir}, devs...)
	s := serve(t, runDir, "/dev/md/fs", args...)
	file := filepath.Join(fuseDir, "fs")
	code, text, _ := mdtool(t, "detail", "--run-dir", runDir, "/dev/md/fs")
	if code != 0 || !strings.Contains(text, "         FUSE File : "+file+"\n") {
		t.Errorf("detail:\n%s", text)
	}
	loop := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--direct-io=on", file))
	detached := false
	detach := func() {
		if !detached {
			run(t, "losetup", "-d", loop)
			detached = true
		}
	}
	defer detach()
	run(t, "mkfs.ext4", "-q", "-F", "-E", "stride=16,stripe-width=48", loop)
	run(t, "mount", loop, mnt)
	files := map[string][]byte{}
	for i := 0; i < 8; i++ {
		b := make([]byte, 256<<10+i*4093)
		rand.Read(b)
		name := fmt.Sprintf("file%d", i)
		files[name] = b
		if err := os.WriteFile(filepath.Join(mnt, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "umount", mnt)
	run(t, "fsck.ext4", "-fn", loop)
	// The loop device keeps the FUSE file open: stop must refuse.
	code, _, errs := mdtool(t, "stop", "--run-dir", runDir, "/dev/md/fs")
	if code != 1 || !strings.Contains(errs, "mdtool: Cannot get exclusive access to /dev/md/fs:Perhaps a running process, mounted filesystem or active volume group?") {
		t.Errorf("stop while attached: exit %d: %s", code, errs)
	}
	detach()
	s.stopAfterRelease()

	s = serve(t, runDir, "/dev/md/fs", args...)
	loop = strings.TrimSpace(run(t, "losetup", "--find", "--show", "--direct-io=on", file))
	detached = false
	run(t, "fsck.ext4", "-fn", loop)
	run(t, "mount", "-o", "ro", loop, mnt)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v, equal %v", name, err, bytes.Equal(got, want))
		}
	}
	run(t, "umount", mnt)
	detach()
	s.stopAfterRelease()
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// mdtoolBinary builds mdtool once for the tests that need a real process:
// the test build (testHooksTag), which also takes fault injection and
// geometry overrides from its environment (testhooks_env.go).
func mdtoolBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mdtool-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "mdtool")
		out, err := exec.Command("go", "build", "-tags", testHooksTag, "-o", binPath, "..").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runBinEnv runs the real binary with env and returns its exit status and
// its combined output (CombinedOutput returns only when every holder of
// the pipe is gone, a daemon it started included).
func runBinEnv(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return code, string(out)
}

// TestBackgroundDaemon runs the real binary: assemble returns once the
// array serves, the daemon outlives it, stop ends it; a daemon killed with
// SIGKILL leaves nothing that blocks the next assemble; SIGTERM stops the
// array cleanly.
func TestBackgroundDaemon(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/bg", 3, 32<<20, "-l5", "-n3", "--assume-clean")
	env := append(os.Environ(), "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	runBin := func(args ...string) (int, string) { return runBinEnv(t, bin, env, args...) }
	assemble := func() int {
		t.Helper()
		code, out := runBin(append([]string{"-A", "/dev/md/bg"}, devs...)...)
		if code != 0 || !strings.Contains(out, "mdtool: /dev/md/bg has been started with 3 drives.\n") {
			t.Fatalf("assemble: exit %d:\n%s", code, out)
		}
		st, err := queryStatus(runDir, "bg")
		if err != nil {
			t.Fatalf("no daemon after assemble: %v", err)
		}
		return st.PID
	}
	pid := assemble()
	if pid == os.Getpid() {
		t.Fatal("the daemon is this process")
	}
	code, out := runBin("-D", "/dev/md/bg")
	if code != 0 || !regexp.MustCompile(`State : clean \n`).MatchString(out) {
		t.Errorf("detail: exit %d\n%s", code, out)
	}
	data := nbdWrite(t, "nbd+unix:///?socket="+daemon.PathsFor(runDir, "bg").NBD(), 1<<20)
	code, out = runBin("--stop", "/dev/md/bg")
	if code != 0 || out != "mdtool: stopped /dev/md/bg\n" {
		t.Errorf("stop: exit %d: %q", code, out)
	}
	if syscall.Kill(pid, 0) == nil {
		// stop waits for the lock; the process may take a moment to exit.
		time.Sleep(100 * time.Millisecond)
	}

	// SIGKILL: lock, sockets and log stay behind.
	pid = assemble()
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
	if _, err := os.Stat(daemon.PathsFor(runDir, "bg").Control()); err != nil {
		t.Fatalf("expected the dead daemon's socket to stay: %v", err)
	}
	code, out = runBin("-D", "/dev/md/bg")
	if code != 1 || !strings.Contains(out, "cannot open /dev/md/bg") {
		t.Errorf("detail of a dead daemon: exit %d: %s", code, out)
	}
	// The members were written while the array was dirty; the killed
	// daemon never marked them clean. The next assemble starts anyway.
	pid = assemble()
	if got := nbdRead(t, "nbd+unix:///?socket="+daemon.PathsFor(runDir, "bg").NBD(), len(data)); !bytes.Equal(got, data) {
		t.Errorf("data lost across SIGKILL")
	}

	// SIGTERM stops the array cleanly.
	syscall.Kill(pid, syscall.SIGTERM)
	waitGone(t, pid)
	for _, p := range []string{daemon.PathsFor(runDir, "bg").Control(), daemon.PathsFor(runDir, "bg").NBD()} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind after SIGTERM", p)
		}
	}
	out2, _ := exec.Command("mdadm", "--examine", devs[0]).CombinedOutput()
	if !strings.Contains(string(out2), "          State : clean\n") {
		t.Errorf("superblock after SIGTERM:\n%s", out2)
	}
	log, _ := os.ReadFile(daemon.PathsFor(runDir, "bg").Log())
	if !strings.Contains(string(log), "terminated: stopping every array") {
		t.Errorf("log:\n%s", log)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		// A zombie of ours? The daemon is not our child (its parent, the
		// assemble command, exited), so it is reaped by init.
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not exit", pid)
}

// TestMetrics serves Prometheus metrics and checks that requests through
// NBD are counted and the array state is exported.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/met", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/met", append([]string{"--metrics", "127.0.0.1:0"}, devs...)...)
	st, err := queryStatus(runDir, "met")
	if err != nil || st.Metrics == "" || strings.HasSuffix(st.Metrics, ":0") {
		t.Fatalf("status metrics address %q: %v", st.Metrics, err)
	}
	nbdWrite(t, s.nbdURI(), 1<<20)
	time.Sleep(1500 * time.Millisecond) // the gauges are updated every second
	resp, err := http.Get("http://" + st.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, re := range []string{
		`(?m)^mdtool_io_requests_total\{array="met",op="write"\} [1-9]`,
		`(?m)^mdtool_io_bytes_total\{array="met",op="write"\} [1-9]`,
		`(?m)^mdtool_array_state\{array="met",state="clean"\} 1$`,
		`(?m)^mdtool_array_raid_disks\{array="met"\} 2$`,
		`(?m)^mdtool_array_degraded_members\{array="met"\} 0$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("metrics lack %s", re)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
	s.stop()
}

// TestSystemdNotify runs `mdtool assemble --foreground --scan /dev/md/NAME`
// as mdtool@.service does, with $NOTIFY_SOCKET: the process reports
// READY=1 once the array serves and STOPPING=1 on SIGTERM, then exits 0.
func TestSystemdNotify(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/unit", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	conf := filepath.Join(dir, "mdadm.conf")
	os.WriteFile(conf, []byte("DEVICE "+filepath.Join(dir, "unit-*.img")+"\nARRAY /dev/md/unit name=testhost:unit\n"), 0o600)
	sock := filepath.Join(dir, "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cmd := exec.Command(bin, "assemble", "--foreground", "--scan", "--config", conf, "/dev/md/unit")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 512)
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	n, _, err := nc.ReadFromUnix(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1\nMAINPID="+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("notification %q %v; stderr:\n%s", buf[:n], err, stderr.String())
	}
	// Ready means serving.
	if _, err := queryStatus(runDir, "unit"); err != nil {
		t.Errorf("READY=1 before the control socket answers: %v", err)
	}
	_ = devs
	cmd.Process.Signal(syscall.SIGTERM)
	n, _, err = nc.ReadFromUnix(buf)
	if err != nil || string(buf[:n]) != "STOPPING=1" {
		t.Errorf("notification %q %v", buf[:n], err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "/dev/md/unit has been started with 2 drives.") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
