package cmd

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/engine/nbd/fiobench"
	"mdtool/internal/mdvm"
)

// kernelArray is one array of the interop test.
type kernelArray struct {
	name   string
	n      int
	mib    int64
	create []string // level and layout options (mdtool create and mdadm --create)
	bitmap bool
	devs   []string
	guest  []string // /dev/vdX in the VM
	md5    string   // expected contents
}

func kernelArrays(prefix string) []*kernelArray {
	return []*kernelArray{
		{name: prefix + "r1", n: 2, mib: 32, create: []string{"-l1", "-n2", "--bitmap=internal", "--bitmap-chunk=1M"}, bitmap: true},
		{name: prefix + "r5", n: 3, mib: 32, create: []string{"-l5", "-n3", "-c64", "--bitmap=internal", "--bitmap-chunk=1M"}, bitmap: true},
		{name: prefix + "r6", n: 4, mib: 24, create: []string{"-l6", "-n4", "-c64"}},
		{name: prefix + "r10", n: 4, mib: 24, create: []string{"-l10", "-n4", "-c64", "-p", "f2"}},
	}
}

// scribble writes the whole array with random data (full stripes) and then
// 4 KiB random writes (partial stripes, read-modify-write) with fio, and
// returns the md5 of the array's contents read back.
func scribble(t *testing.T, uri string, size int64) string {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	src := filepath.Join(t.TempDir(), "fill")
	os.WriteFile(src, data, 0o600)
	run(t, "nbdcopy", "--", src, uri)
	j := fiobench.Job{Name: "scribble", RW: "randwrite", BS: "4k", IODepth: 16, NumJobs: 2, Size: size / 4 / 4096 * 4096,
		Extra: []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, out, err := fiobench.Run(ctx, uri, j); err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	return readMD5(t, uri, size)
}

func readMD5(t *testing.T, uri string, size int64) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dump")
	run(t, "nbdcopy", "--", uri, dst)
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := md5.New()
	if n, err := io.Copy(h, f); err != nil || n != size {
		t.Fatalf("read %d of %d bytes: %v", n, size, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkScript assembles each array in the VM, checks it and prints
// "RES name state=... mismatch=N md5=... dirty=..." lines.
func checkScript(arrays []*kernelArray, first int) string {
	// No "set -e": a failing step must not end the guest's init; the
	// missing RES line and the output tell what failed.
	var b strings.Builder
	for i, a := range arrays {
		md := fmt.Sprintf("/dev/md%d", first+i)
		fmt.Fprintf(&b, "mdadm --assemble %s %s || { echo \"ASSEMBLY FAILED %s\"; cat /proc/mdstat; mdadm --examine %s; }\n",
			md, strings.Join(a.guest, " "), a.name, strings.Join(a.guest, " "))
		fmt.Fprintf(&b, "st=$(mdadm --detail %s | sed -n 's/^ *State : //p' | tr -d ' ')\n", md)
		fmt.Fprintf(&b, "echo check > /sys/block/md%d/md/sync_action; sleep 0.2; mdadm --wait %s || true\n", first+i, md)
		fmt.Fprintf(&b, "mm=$(cat /sys/block/md%d/md/mismatch_cnt)\n", first+i)
		fmt.Fprintf(&b, "sum=$(md5sum %s | cut -d' ' -f1)\n", md)
		dirty := "-"
		if a.bitmap {
			dirty = "$(mdadm -X " + a.guest[0] + " | sed -n 's/.*chunks), \\([0-9]*\\) dirty.*/\\1/p')"
		}
		fmt.Fprintf(&b, "echo \"RES %s state=$st mismatch=$mm md5=$sum dirty=%s\"\n", a.name, dirty)
		fmt.Fprintf(&b, "mdadm --stop %s\n", md)
	}
	return b.String()
}

var reRes = regexp.MustCompile(`(?m)^RES (\S+) state=(\S*) mismatch=(\S*) md5=(\S*) dirty=(\S*)$`)

type kernelResult struct{ state, mismatch, md5, dirty string }

func parseRes(out string) map[string]kernelResult {
	m := map[string]kernelResult{}
	for _, g := range reRes.FindAllStringSubmatch(out, -1) {
		m[g[1]] = kernelResult{g[2], g[3], g[4], g[5]}
	}
	return m
}

// TestKernelInterop checks both directions with Linux 6.1 (mdvm):
//
//  1. arrays created by mdtool, assembled, written (full-stripe and 4 KiB
//     writes) and stopped by mdtool are assembled by the kernel clean, with
//     the same contents, no dirty bitmap bits and mismatch_cnt 0;
//  2. arrays the kernel created and wrote are assembled and served by
//     mdtool with the contents the kernel wrote; mdtool writes them, stops,
//     and the kernel finds the new contents and mismatch_cnt 0.
func TestKernelInterop(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	ours := kernelArrays("m")
	theirs := kernelArrays("k")
	var disks []mdvm.Disk
	guest := func() string { return "/dev/vd" + string(rune('a'+len(disks))) }
	for _, a := range ours {
		opts := append([]string{"--assume-clean"}, a.create...)
		a.devs = mkArray(t, dir, "/dev/md/"+a.name, a.n, a.mib<<20, opts...)
		s := serve(t, runDir, "/dev/md/"+a.name, a.devs...)
		a.md5 = scribble(t, s.nbdURI(), arraySize(t, runDir, a.name))
		s.stop()
		for _, d := range a.devs {
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: d, Mode: mdvm.COW})
		}
	}
	var script strings.Builder
	script.WriteString(checkScript(ours, 0))
	for i, a := range theirs {
		for j := 0; j < a.n; j++ {
			a.devs = append(a.devs, sparse(t, dir, fmt.Sprintf("%s-d%d.img", a.name, j), a.mib<<20))
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: a.devs[j], Mode: mdvm.RW})
		}
		md := fmt.Sprintf("/dev/md%d", 10+i)
		fmt.Fprintf(&script, "mdadm --create %s --run --homehost=any --name=%s %s %s\n", md, a.name, strings.Join(a.create, " "), strings.Join(a.guest, " "))
		fmt.Fprintf(&script, "mdadm --wait %s || true\n", md)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=1M oflag=direct 2>/dev/null || true\n", md)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=4k count=300 seek=77 oflag=direct 2>/dev/null\n", md)
		fmt.Fprintf(&script, "echo \"KMD5 %s $(md5sum %s | cut -d' ' -f1)\"\n", a.name, md)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 600 * time.Second})
	res := parseRes(string(out))
	t.Logf("kernel on mdtool's arrays: %+v", res)
	for _, a := range ours {
		r, ok := res[a.name]
		switch {
		case !ok:
			t.Errorf("%s: no result:\n%s", a.name, out)
		case r.state != "clean" || r.mismatch != "0" || r.md5 != a.md5 || (a.bitmap && r.dirty != "0"):
			t.Errorf("%s: kernel sees state %q, mismatch_cnt %s, md5 %s (mdtool wrote %s), dirty bitmap chunks %s",
				a.name, r.state, r.mismatch, r.md5, a.md5, r.dirty)
		}
	}
	kmd5 := map[string]string{}
	for _, g := range regexp.MustCompile(`(?m)^KMD5 (\S+) (\S+)$`).FindAllStringSubmatch(string(out), -1) {
		kmd5[g[1]] = g[2]
	}

	// mdtool serves what the kernel wrote, then writes it.
	disks = nil
	for _, a := range theirs {
		if kmd5[a.name] == "" {
			t.Fatalf("%s: the kernel did not report its contents:\n%s", a.name, out)
		}
		s := serve(t, runDir, "/dev/md/"+a.name, a.devs...)
		size := arraySize(t, runDir, a.name)
		if got := readMD5(t, s.nbdURI(), size); got != kmd5[a.name] {
			t.Errorf("%s: mdtool reads md5 %s, the kernel wrote %s", a.name, got, kmd5[a.name])
		}
		a.md5 = scribble(t, s.nbdURI(), size)
		s.stop()
		a.guest = nil
		for _, d := range a.devs {
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: d, Mode: mdvm.COW})
		}
	}
	out = mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: checkScript(theirs, 0), Timeout: 600 * time.Second})
	res = parseRes(string(out))
	t.Logf("kernel on its own arrays after mdtool wrote them: %+v", res)
	for _, a := range theirs {
		r, ok := res[a.name]
		switch {
		case !ok:
			t.Errorf("%s: no result:\n%s", a.name, out)
		case r.state != "clean" || r.mismatch != "0" || r.md5 != a.md5 || (a.bitmap && r.dirty != "0"):
			t.Errorf("%s (kernel-made, written by mdtool): kernel sees state %q, mismatch_cnt %s, md5 %s (want %s), dirty %s",
				a.name, r.state, r.mismatch, r.md5, a.md5, r.dirty)
		}
	}
}
