// Package mdvm runs shell commands against the real Linux md driver and
// mdadm 4.2 inside a throw-away qemu VM, through the shared mdvm tool
// (../shared/tools/mdvm from the repository root). Tests use it as the
// compatibility oracle.
package mdvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Mode says how a disk image is attached.
type Mode int

const (
	RW  Mode = iota // --disk: guest writes land in the file
	COW             // --cowdisk: guest writes go to a discarded overlay
	RO              // --rodisk: read-only device
)

// Disk is one image file attached as /dev/vda, /dev/vdb, ... in order.
type Disk struct {
	Path string
	Mode Mode
}

// Run describes one VM run.
type Run struct {
	Disks   []Disk
	Script  string        // busybox sh commands
	Share   string        // host dir mounted at /share, optional
	Timeout time.Duration // default 300s
	Mem     int           // MiB, default 1024
	Bins    []string      // extra host binaries to copy into the guest
}

// Result is what the guest printed and its exit status.
type Result struct {
	Output []byte
	Code   int
}

// Tool returns the path of the mdvm tool: $MDTOOL_MDVM, else
// ../shared/tools/mdvm above the repository root.
func Tool() (string, error) {
	if p := os.Getenv("MDTOOL_MDVM"); p != "" {
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "..", "shared", "tools", "mdvm")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("mdvm tool not found at %s", p)
	}
	return p, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

var (
	availOnce sync.Once
	availErr  error
)

// Available reports whether VM runs can work here: the tool, qemu, and a
// kernel in /boot.
func Available() error {
	availOnce.Do(func() {
		if _, err := Tool(); err != nil {
			availErr = err
			return
		}
		if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
			availErr = errors.New("qemu-system-x86_64 not installed")
			return
		}
		if m, _ := filepath.Glob("/boot/vmlinuz-*"); len(m) == 0 {
			availErr = errors.New("no kernel in /boot (apt-get install linux-image-amd64)")
		}
	})
	return availErr
}

// Require skips the test when the VM cannot run, except under CI
// (CI=true), where the missing oracle is a failure. It also skips under
// -short.
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		if testing.Short() && os.Getenv("CI") == "" {
			t.Skip("kernel VM test skipped in -short mode")
		}
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("kernel VM oracle unavailable in CI: %v", err)
	}
	t.Skipf("kernel VM oracle unavailable: %v", err)
}

// vmLock serialises VM runs inside one test binary: the machines have two
// cores and each VM wants both.
var vmLock sync.Mutex

// Exec runs the VM. A non-zero guest exit status is not an error; a VM that
// fails to report one (timeout, panic) is.
func (r Run) Exec(ctx context.Context) (Result, error) {
	tool, err := Tool()
	if err != nil {
		return Result{}, err
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 300 * time.Second
	}
	args := []string{"--timeout", strconv.Itoa(int(timeout.Seconds()))}
	if r.Mem > 0 {
		args = append(args, "--mem", strconv.Itoa(r.Mem))
	}
	for _, d := range r.Disks {
		flag := "--disk"
		switch d.Mode {
		case COW:
			flag = "--cowdisk"
		case RO:
			flag = "--rodisk"
		}
		abs, err := filepath.Abs(d.Path)
		if err != nil {
			return Result{}, err
		}
		args = append(args, flag, abs)
	}
	if r.Share != "" {
		args = append(args, "--share", r.Share)
	}
	for _, b := range r.Bins {
		args = append(args, "--bin", b)
	}
	args = append(args, "--", r.Script)
	vmLock.Lock()
	defer vmLock.Unlock()
	// Through bash: the shared tools copy may lack execute bits.
	cmd := exec.CommandContext(ctx, "bash", append([]string{tool}, args...)...)
	cmd.Env = append(os.Environ(), accelEnv()...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Result{}, err
		}
		code = ee.ExitCode()
	}
	if code == 124 || code == 125 || code == 2 && errb.Len() > 0 && out.Len() == 0 {
		return Result{Output: out.Bytes(), Code: code}, fmt.Errorf("mdvm failed (exit %d): %s", code, lastLines(errb.String(), 15))
	}
	return Result{Output: out.Bytes(), Code: code}, nil
}

// accelEnv forces TCG unless MDVM_ACCEL is set: on these machines /dev/kvm
// exists but a KVM guest hangs in firmware.
func accelEnv() []string {
	if os.Getenv("MDVM_ACCEL") != "" {
		return nil
	}
	return []string{"MDVM_ACCEL=tcg"}
}

func lastLines(s string, n int) string {
	lines := bytes.Split([]byte(s), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// MustExec runs the VM and fails the test on a VM failure or a non-zero
// guest exit status, logging the output.
func MustExec(t testing.TB, r Run) []byte {
	t.Helper()
	res, err := r.Exec(context.Background())
	if err != nil {
		t.Fatalf("mdvm: %v\noutput:\n%s", err, res.Output)
	}
	if res.Code != 0 {
		t.Fatalf("mdvm guest script exited %d; output:\n%s", res.Code, res.Output)
	}
	return res.Output
}
