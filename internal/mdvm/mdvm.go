// Package mdvm runs shell commands against the real Linux md driver and
// mdadm 4.2 inside a throw-away qemu VM (Debian's kernel, TCG, a busybox +
// mdadm initramfs built and cached here). Tests use it as the
// compatibility oracle; cmd/mdvm is the same driver as a command. An
// external mdvm tool can still be used instead by naming it in
// $MDTOOL_MDVM.
package mdvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

	// The fields below are for the in-repo driver only (an external
	// $MDTOOL_MDVM tool ignores them).
	Kernel      string        // kernel version or prefix ("6.12"); default $MDVM_KERNEL, else the newest 6.1.x
	Modules     []string      // extra kernel modules to load; default $MDVM_EXTRA_MODULES
	Hostname    string        // guest hostname, default "mdvm" (mdadm's homehost)
	Trace       bool          // run the script with sh -x
	SMP         int           // vCPUs, default 2
	KLog        string        // file to save the guest kernel log in
	Rebuild     bool          // rebuild the cached initramfs
	BootTimeout time.Duration // per boot, default $MDVM_BOOT_TIMEOUT or 90s
	BootTries   int           // boots in all, default $MDVM_BOOT_TRIES or 3
	Progress    io.Writer     // progress messages, optional

	bootTimeouts []time.Duration // tests: boot timeout of the first tries
}

// Result is what the guest printed and its exit status.
type Result struct {
	Output []byte
	Code   int
	// Ran is how long the guest ran (boot retries included; the wait
	// for a guest slot not): what a VM case costs CI.
	Ran time.Duration
}

// Tool returns the external mdvm tool named by $MDTOOL_MDVM, or "" when
// the in-repo driver runs the VMs (the default).
func Tool() (string, error) {
	p := os.Getenv("MDTOOL_MDVM")
	if p == "" {
		return "", nil
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("MDTOOL_MDVM: %w", err)
	}
	return p, nil
}

var (
	availOnce sync.Once
	availErr  error
)

// Available reports whether VM runs can work here: qemu and a kernel in
// /boot (and the external tool when $MDTOOL_MDVM names one).
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
		if _, err := pickKernel(""); err != nil {
			availErr = err
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

// Exec runs the VM, with the in-repo driver unless $MDTOOL_MDVM names an
// external tool. A non-zero guest exit status is not an error; a VM that
// fails to report one (timeout, panic) is.
func (r Run) Exec(ctx context.Context) (Result, error) {
	tool, err := Tool()
	if err != nil {
		return Result{}, err
	}
	if tool == "" {
		release, err := acquireSlot(ctx)
		if err != nil {
			return Result{}, err
		}
		defer release()
		t0 := time.Now()
		res, err := r.execBuiltin(ctx)
		res.Ran = time.Since(t0)
		return res, err
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
	release, err := acquireSlot(ctx)
	if err != nil {
		return Result{}, err
	}
	defer release()
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
	t0 := time.Now()
	res, err := r.Exec(context.Background())
	// for CI's time budget: go test -v ... | grep 'mdvm: guest ran'
	t.Logf("mdvm: guest ran %.1fs (%.1fs with the wait for a guest slot)", res.Ran.Seconds(), time.Since(t0).Seconds())
	if err != nil {
		t.Fatalf("mdvm: %v\noutput:\n%s", err, res.Output)
	}
	if res.Code != 0 {
		t.Fatalf("mdvm guest script exited %d; output:\n%s", res.Code, res.Output)
	}
	return res.Output
}

// RequireKernel is Require for a run that boots a given kernel (such as
// "6.12", which `make deps` installs beside the default 6.1): it skips
// outside CI when that kernel is not installed and fails under CI=true.
func RequireKernel(t testing.TB, ver string) {
	t.Helper()
	Require(t)
	if _, err := pickKernel(ver); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kernel VM oracle: %v", err)
		}
		t.Skipf("kernel VM oracle: %v", err)
	}
}
