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
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
	fiobench "mdtool/internal/nbdbench"
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
	mdvm.Parallel(t)
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

// policyArray is one array of TestKernelAssemblePolicy.
type policyArray struct {
	md    string
	uuid  string
	devs  []string // host image paths
	guest []string // /dev/vdX
}

// policyStep is one assembly of TestKernelAssemblePolicy: the same flags
// and members for mdadm 4.2 in the VM and for mdtool.
type policyStep struct {
	id      string
	array   *policyArray
	flags   []string
	members []int // indices into devs
	started bool  // the array is expected to start
	// scan assembles with --scan from an mdadm.conf whose DEVICE line
	// names the members and whose ARRAY line the array (by UUID).
	scan bool
}

// TestKernelAssemblePolicy runs the same assemblies with mdadm 4.2 (Linux
// 6.1, mdvm) and with mdtool: a newly degraded array starts only with
// --run (or --force), an array whose superblocks already record it
// degraded starts without, --no-degraded leaves it unstarted, too few
// members never start, stale members are left out, and --force brings
// stale event counts up. mdtool must exit as mdadm does and print every
// line mdadm prints (device names mapped, "mdadm:" as "mdtool:"); it may
// say more (which members it left out and why).
func TestKernelAssemblePolicy(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	mk := func(md string, n int, opts []string, missing int) *policyArray {
		a := &policyArray{md: md, uuid: fmt.Sprintf("0a1b2c3d:4e5f6071:8293a4b5:c6d7e8%02x", md[len(md)-1])}
		opts = append(opts, "--uuid="+a.uuid)
		var args []string
		for i := 0; i < n; i++ {
			if i == missing {
				args = append(args, "missing")
			}
			p := sparse(t, dir, fmt.Sprintf("%s-d%d.img", filepath.Base(md), i), size)
			a.devs = append(a.devs, p)
			args = append(args, p)
		}
		if missing == n {
			args = append(args, "missing")
		}
		full := append(append([]string{"create", md, "--run", "--homehost=testhost", "--assume-clean"}, opts...), args...)
		if code, _, errs := mdtool(t, full...); code != 0 {
			t.Fatalf("create %v: exit %d: %s", full, code, errs)
		}
		return a
	}
	whole := mk("/dev/md/pa", 4, []string{"-l5", "-n4"}, -1)
	runDeg := mk("/dev/md/pb", 4, []string{"-l5", "-n4"}, -1)
	created := mk("/dev/md/pc", 3, []string{"-l5", "-n4"}, 1)  // raid5 made with one slot missing
	created6 := mk("/dev/md/pd", 4, []string{"-l6", "-n5"}, 4) // raid6 made with one slot missing
	stale := mk("/dev/md/pe", 3, []string{"-l5", "-n3"}, -1)   // one member stale
	forced := mk("/dev/md/pf", 4, []string{"-l5", "-n4"}, -1)  // two members stale
	scanned := mk("/dev/md/pg", 4, []string{"-l5", "-n4"}, -1) // assembled with --scan
	// stale: written on two members only.
	s := serve(t, runDir, stale.md, "--run", stale.devs[0], stale.devs[1])
	nbdWrite(t, s.nbdURI(), 1<<20)
	s.stop()
	// forced: the old copies of two members come back after a write.
	for _, i := range []int{2, 3} {
		copyFile(t, forced.devs[i], forced.devs[i]+".old")
	}
	s = serve(t, runDir, forced.md, forced.devs...)
	nbdWrite(t, s.nbdURI(), 1<<20)
	s.stop()
	for _, i := range []int{2, 3} {
		copyFile(t, forced.devs[i]+".old", forced.devs[i])
	}

	// Per array, steps that must not start it come first; at most the
	// last one starts it (the VM's writes are thrown away, mdtool's are
	// not, so both see the same members at every step).
	steps := []policyStep{
		{"newly degraded", whole, nil, []int{0, 1, 2}, false, false},
		{"too few", whole, nil, []int{0, 1}, false, false},
		{"too few with --run", whole, []string{"--run"}, []int{0, 1}, false, false},
		{"newly degraded --no-degraded", whole, []string{"--no-degraded"}, []int{0, 1, 3}, false, false},
		{"newly degraded --force", whole, []string{"--force"}, []int{0, 1, 3}, true, false},
		{"newly degraded --run", runDeg, []string{"--run"}, []int{1, 2, 3}, true, false},
		{"created degraded, one more missing", created6, nil, []int{0, 1, 3}, false, false},
		{"created degraded, one more missing --run", created6, []string{"--run"}, []int{0, 1, 3}, true, false},
		{"created degraded, two more missing", created, nil, []int{0, 2}, false, false},
		{"created degraded", created, nil, []int{2, 0, 1}, true, false},
		{"stale member", stale, nil, []int{2, 1, 0}, true, false},
		{"two stale members", forced, nil, []int{0, 1, 2, 3}, false, false},
		{"two stale members --force", forced, []string{"--force"}, []int{0, 1, 2, 3}, true, false},
		{"--scan --no-degraded, newly degraded", scanned, []string{"--no-degraded"}, []int{0, 1, 2}, false, true},
		{"--scan, newly degraded", scanned, nil, []int{0, 1, 2}, true, true},
	}
	var disks []mdvm.Disk
	for _, a := range []*policyArray{whole, runDeg, created, created6, stale, forced, scanned} {
		for _, d := range a.devs {
			a.guest = append(a.guest, "/dev/vd"+string(rune('a'+len(disks))))
			disks = append(disks, mdvm.Disk{Path: d, Mode: mdvm.COW})
		}
	}
	var script strings.Builder
	for i, st := range steps {
		var m []string
		for _, k := range st.members {
			m = append(m, st.array.guest[k])
		}
		fmt.Fprintf(&script, "echo '== %d'\n", i)
		if st.scan {
			fmt.Fprintf(&script, "printf 'DEVICE %s\\nARRAY %s UUID=%s\\n' > /tmp/scan%d.conf\n", strings.Join(m, " "), st.array.md, st.array.uuid, i)
			fmt.Fprintf(&script, "mdadm --assemble --scan --config=/tmp/scan%d.conf %s 2>&1; echo \"RC $?\"\n", i, strings.Join(st.flags, " "))
		} else {
			fmt.Fprintf(&script, "mdadm --assemble %s %s %s 2>&1; echo \"RC $?\"\n", st.array.md, strings.Join(st.flags, " "), strings.Join(m, " "))
		}
		fmt.Fprintf(&script, "grep -q '^md' /proc/mdstat && cat /proc/mdstat | grep '^md' | sed 's/^/MDSTAT /'\n")
		fmt.Fprintf(&script, "mdadm --stop %s >/dev/null 2>&1; echo '== end'\n", st.array.md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 300 * time.Second}))
	blocks := regexp.MustCompile(`(?ms)^== (\d+)\n(.*?)^RC (\d+)\n(.*?)^== end$`).FindAllStringSubmatch(out, -1)
	if len(blocks) != len(steps) {
		t.Fatalf("%d of %d steps ran in the VM:\n%s", len(blocks), len(steps), out)
	}
	for _, b := range blocks {
		i, _ := strconv.Atoi(b[1])
		st := steps[i]
		mdadmOut, mdadmRC, mdstat := b[2], b[3], b[4]
		t.Logf("%s: mdadm exit %s:\n%s", st.id, mdadmRC, mdadmOut)
		if !strings.Contains(mdadmOut, "mdadm: ") {
			t.Errorf("%s: mdadm said nothing:\n%s", st.id, out)
		}
		if started := strings.Contains(mdstat, " : active "); started != st.started {
			t.Errorf("%s: mdadm started the array: %v, the test expects %v:\n%s%s", st.id, started, st.started, mdadmOut, mdstat)
		}
		// mdtool on the same members.
		var args []string
		for _, k := range st.members {
			args = append(args, st.array.devs[k])
		}
		full := append(append([]string{}, st.flags...), args...)
		if st.scan {
			conf := filepath.Join(dir, fmt.Sprintf("scan%d.conf", i))
			text := fmt.Sprintf("DEVICE %s\nARRAY %s UUID=%s\n", strings.Join(args, " "), st.array.md, st.array.uuid)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			full = append([]string{"--scan", "--config=" + conf}, st.flags...)
		}
		code, errs, started := assembleOnce(t, runDir, st.array.md, st.scan, full)
		if started != st.started || strconv.Itoa(code) != mdadmRC {
			t.Errorf("%s: mdtool exit %d, started %v; mdadm exit %s:\nmdadm:\n%smdtool:\n%s", st.id, code, started, mdadmRC, mdadmOut, errs)
		}
		for _, line := range strings.Split(strings.TrimSpace(mdadmOut), "\n") {
			want := strings.Replace(line, "mdadm: ", "mdtool: ", 1)
			for k := len(st.array.guest) - 1; k >= 0; k-- {
				want = strings.ReplaceAll(want, st.array.guest[k], st.array.devs[k])
			}
			if !strings.Contains(errs, want+"\n") {
				t.Errorf("%s: mdtool does not say %q:\nmdadm:\n%smdtool:\n%s", st.id, want, mdadmOut, errs)
			}
		}
	}
}

// assembleOnce runs `assemble --foreground` in-process; when the array
// starts it is stopped at once. It returns the exit status (0 when it
// started), the stderr of assemble and whether it started.
func assembleOnce(t *testing.T, runDir, md string, scan bool, args []string) (int, string, bool) {
	t.Helper()
	env, _, errb := daemonEnv()
	done := make(chan int, 1)
	full := []string{"assemble", "--foreground", "--run-dir", runDir}
	if !scan {
		full = append(full, md)
	}
	full = append(full, args...)
	go func() { done <- Main(full, env) }()
	for {
		select {
		case code := <-done:
			return code, errb.String(), false
		case <-time.After(5 * time.Millisecond):
		}
		if strings.Contains(errb.String(), " has been started with ") {
			if code, _, errs := mdtool(t, "stop", "--run-dir", runDir, md); code != 0 {
				t.Fatalf("stop %s: exit %d: %s", md, code, errs)
			}
			select {
			case code := <-done:
				return code, errb.String(), true
			case <-time.After(60 * time.Second):
				t.Fatalf("the daemon of %s did not end", md)
			}
		}
	}
}
