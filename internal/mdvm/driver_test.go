package mdvm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The driver is in the repository: with $MDTOOL_MDVM unset no external
// tool is used, and nothing in the package points outside the repository
// (the old default was ../shared/tools/mdvm).
func TestDriverIsInRepository(t *testing.T) {
	t.Setenv("MDTOOL_MDVM", "")
	tool, err := Tool()
	if err != nil || tool != "" {
		t.Fatalf("Tool() = %q, %v; want the in-repo driver (\"\", nil)", tool, err)
	}
	var files []string
	for _, pat := range []string{"*.go", "guest/*", "cmd/mdvm/*.go"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("package sources not found: %v", files)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"shared/tools", "../shared", "/work/"} {
			if bytes.Contains(data, []byte(bad)) {
				t.Errorf("%s refers to %q", f, bad)
			}
		}
	}
}

func TestArchiveNewc(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Fatal("cpio not installed (make deps)")
	}
	a := newArchive()
	a.file("/usr/lib/x/libz.so", 0o755, []byte("12345"))
	a.symlink("bin/sh", "busybox")
	a.file("init", 0o755, []byte("#!/bin/sh\n"))
	var b bytes.Buffer
	if err := a.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Errorf("archive length %d not a multiple of 4", b.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(b.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "usr/lib/x/libz.so")); err != nil || string(data) != "12345" {
		t.Errorf("file: %q, %v", data, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || l != "busybox" {
		t.Errorf("symlink: %q, %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "init")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("init: %v, %v", st, err)
	}
	// parents precede their contents (the kernel does not create them)
	cmd = exec.Command("cpio", "-it", "--quiet")
	cmd.Stdin = bytes.NewReader(b.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "bin\nbin/sh\ninit\nusr\nusr/lib\nusr/lib/x\nusr/lib/x/libz.so\n"
	if string(out) != want {
		t.Errorf("archive order:\n%s\nwant:\n%s", out, want)
	}
}

func TestResultFraming(t *testing.T) {
	dir := t.TempDir()
	p := &prepared{nonce: "abc", outLog: filepath.Join(dir, "out")}
	write := func(s string) {
		if err := os.WriteFile(p.outLog, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("noise\r\n__MDVM_BEGIN_abc__\nline 1\nno newline__MDVM_END_abc__\n__MDVM_RC=42\n")
	res, ok := p.result()
	if !ok || res.Code != 42 || string(res.Output) != "line 1\nno newline" {
		t.Errorf("got %q code %d ok %v", res.Output, res.Code, ok)
	}
	write("__MDVM_BEGIN_abc__\npartial\n")
	if res, ok := p.result(); ok || string(res.Output) != "partial\n" {
		t.Errorf("without end: %q ok %v", res.Output, ok)
	}
	write("__MDVM_BEGIN_xyz__\nx\n__MDVM_END_xyz__\n__MDVM_RC=0\n")
	if _, ok := p.result(); ok {
		t.Errorf("another run's markers accepted")
	}
}

func TestVersionOrder(t *testing.T) {
	vs := []string{"6.12.9+deb12-amd64", "6.1.0-9-amd64", "6.1.0-57-amd64", "5.10.0-30-amd64"}
	want := []string{"5.10.0-30-amd64", "6.1.0-9-amd64", "6.1.0-57-amd64", "6.12.9+deb12-amd64"}
	for i := range vs {
		for j := range vs {
			if versionLess(vs[i], vs[j]) && versionLess(vs[j], vs[i]) {
				t.Fatalf("%s and %s both less", vs[i], vs[j])
			}
		}
	}
	got := append([]string(nil), vs...)
	for i := 1; i < len(got); i++ {
		for j := i; j > 0 && versionLess(got[j], got[j-1]); j-- {
			got[j], got[j-1] = got[j-1], got[j]
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}

func TestModuleOrder(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/drivers/md/raid456.ko.xz: kernel/crypto/async_tx/async_pq.ko kernel/lib/raid6/raid6_pq.ko\n" +
		"kernel/crypto/async_tx/async_pq.ko: kernel/lib/raid6/raid6_pq.ko\n" +
		"kernel/lib/raid6/raid6_pq.ko:\n" +
		"kernel/drivers/md/md-mod.ko:\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := readModDeps(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := md.order([]string{"md_mod", "raid456", "virtio_blk"}, map[string]bool{"virtio_blk": true}, map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/drivers/md/md-mod.ko", "kernel/lib/raid6/raid6_pq.ko", "kernel/crypto/async_tx/async_pq.ko", "kernel/drivers/md/raid456.ko.xz"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if koName(want[3]) != "kernel/drivers/md/raid456.ko" {
		t.Errorf("koName %q", koName(want[3]))
	}
	if _, err := md.order([]string{"nosuch"}, nil, map[string]bool{}); err == nil {
		t.Errorf("a missing module is not an error")
	}
}

// A guest that does not boot in time is booted again, and its script runs
// once; mdvm-crash ends the run like a power cut, with the status given,
// leaving the array dirty (active) in the image files.
func TestBootRetryAndCrash(t *testing.T) {
	Require(t)
	if tool, _ := Tool(); tool != "" {
		t.Skip("MDTOOL_MDVM names an external tool")
	}
	dir := t.TempDir()
	var disks []Disk
	for _, n := range []string{"a.img", "b.img"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 32<<20); err != nil {
			t.Fatal(err)
		}
		disks = append(disks, Disk{Path: p})
	}
	var progress bytes.Buffer
	r := Run{
		Disks: disks,
		Script: `set -e
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --assume-clean --homehost=any --name=t /dev/vda /dev/vdb >/dev/null 2>&1
echo 3600 > /sys/block/md0/md/safe_mode_delay
dd if=/dev/urandom of=/dev/md0 bs=4k count=16 oflag=direct 2>/dev/null
echo "STATE $(cat /sys/block/md0/md/array_state)"
mdvm-crash 7
echo NOT REACHED`,
		Timeout:      300 * time.Second,
		Progress:     &progress,
		bootTimeouts: []time.Duration{time.Millisecond},
	}
	release, err := acquireSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.execBuiltin(context.Background())
	release()
	if err != nil {
		t.Fatalf("%v\noutput:\n%s\nprogress:\n%s", err, res.Output, progress.String())
	}
	if !strings.Contains(progress.String(), "did not boot within") {
		t.Errorf("the first boot was not retried:\n%s", progress.String())
	}
	if res.Code != 7 || string(res.Output) != "STATE active\n" {
		t.Fatalf("code %d output %q, want 7 and the state line only", res.Code, res.Output)
	}
	if _, err := exec.LookPath("mdadm"); err == nil {
		out, _ := exec.Command("mdadm", "--examine", disks[0].Path).CombinedOutput()
		if !regexpState.Match(out) {
			t.Errorf("the crashed member is not active:\n%s", out)
		}
	}

	// every boot times out: an error (no guest status), never a code
	r = Run{Script: "true", Timeout: 60 * time.Second, BootTries: 2, bootTimeouts: []time.Duration{time.Millisecond, time.Millisecond}}
	release, _ = acquireSlot(context.Background())
	res, err = r.execBuiltin(context.Background())
	release()
	if !errors.Is(err, ErrNoStatus) || !strings.Contains(err.Error(), "did not boot in 2 tries") {
		t.Errorf("a guest that never boots: %v (code %d)", err, res.Code)
	}
}

var regexpState = regexp.MustCompile(`(?m)^\s*State : active\s*$`)

// md-linear is optional (Linux 6.8-6.13 have none); any other missing
// module stays an error.
func TestOptionalModules(t *testing.T) {
	md := &modDeps{deps: map[string][]string{}, byName: map[string]string{"raid0": "kernel/drivers/md/raid0.ko.xz", "linear": "kernel/drivers/md/linear.ko"}}
	if got := md.present([]string{"linear", "raid0"}, nil); !reflect.DeepEqual(got, []string{"linear", "raid0"}) {
		t.Errorf("with linear: %v", got)
	}
	delete(md.byName, "linear")
	if got := md.present([]string{"linear", "raid0", "nosuch"}, nil); !reflect.DeepEqual(got, []string{"raid0", "nosuch"}) {
		t.Errorf("without linear: %v", got)
	}
}
