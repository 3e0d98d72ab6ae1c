package cmd

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	fiobench "mdtool/internal/nbdbench"
)

// hostExamineBitmap runs the host's mdadm -X on a read-only loop device
// of img (mdadm 4.2's -X cannot read plain files) and returns its text
// without the Filename line.
func hostExamineBitmap(t *testing.T, img string) string {
	t.Helper()
	requireHostMdadm(t)
	loop := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--read-only", img))
	defer run(t, "losetup", "-d", loop)
	out, err := exec.Command("mdadm", "-X", loop).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm -X %s (%s): %v\n%s", loop, img, err, out)
	}
	return dropFilename(string(out))
}

// normLocalTo drops the "(local to host X)" note: the host's mdadm
// compares with its own host name, the in-process mdtool with the test's.
func normLocalTo(s string) string {
	return strings.TrimSpace(reLocalTo.ReplaceAllString(s, ""))
}

var reLocalTo = regexp.MustCompile(`  \(local to host [^)]*\)`)

func dropFilename(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "Filename : ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// sameAsHostMdadm compares mdtool examine and -X of every member with the
// host's mdadm.
func sameAsHostMdadm(t *testing.T, what string, devs []string) {
	t.Helper()
	for _, d := range devs {
		host := hostExamine(t, d)
		code, ours, errs := mdtool(t, "examine", d)
		if code != 0 {
			t.Fatalf("%s: examine %s: exit %d: %s", what, d, code, errs)
		}
		if normLocalTo(host) != normLocalTo(ours) {
			t.Errorf("%s: examine %s differs from mdadm --examine:\nmdadm:\n%s\nmdtool:\n%s", what, d, host, ours)
		}
		if !strings.Contains(host, "Internal Bitmap") {
			continue
		}
		hx := hostExamineBitmap(t, d)
		code, ox, errs := mdtool(t, "examine-bitmap", d)
		if code != 0 {
			t.Fatalf("%s: examine-bitmap %s: exit %d: %s", what, d, code, errs)
		}
		if dropFilename(ox) != hx {
			t.Errorf("%s: examine-bitmap %s differs from mdadm -X:\nmdadm:\n%s\nmdtool:\n%s", what, d, hx, ox)
		}
	}
}

// TestGrowSizeMax: for raid1, raid5, raid6 and raid10 with a bitmap,
// data is written, every member file is extended and `--grow --size=max`
// makes the array use it while it is served: mdadm's message, the new
// size in detail and over NBD (the old data intact, the new region
// writable), the new region resynced, and after the stop host mdadm
// --examine and -X print what mdtool prints. The array assembles again
// at the new size. --array-size then sets a smaller exported size that
// is not kept over a stop and assembly, and is refused beyond the
// component sizes. At the end the kernel assembles every grown set, its
// check finds 0 mismatches and the contents are the same.
func TestGrowSizeMax(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	dir := t.TempDir()
	runDir := dir + "/run"
	const oldSize, newSize = 24 << 20, 40 << 20
	cases := []struct {
		name string
		opts []string
	}{
		{"r1", []string{"-l1", "-n2"}},
		{"r5", []string{"-l5", "-n3", "-c64"}},
		{"r6", []string{"-l6", "-n4", "-c64"}},
		{"r10", []string{"-l10", "-n4", "-c64"}},
		// 1.0 without a bitmap: the superblock moves to the new end.
		{"r1e10", []string{"-l1", "-n2", "-e1.0", "--bitmap=none"}},
	}
	var sets []kernelCheck
	for _, c := range cases {
		md := "/dev/md/grow" + c.name
		devs := mkArrayDevs(t, dir, md, c.opts, oldSize)
		s := serve(t, runDir, md, devs...)
		sock := daemon.PathsFor(runDir, s.name).NBD()
		st0, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		// fio verify over the old size, running while the array grows.
		fioDone := make(chan error, 1)
		go func() { fioDone <- fioVerify(s.nbdURI(), 0, st0.Size) }()
		for _, d := range devs {
			if err := os.Truncate(d, newSize); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errs := mdtool(t, "--grow", "--run-dir", runDir, md, "--size=max")
		if code != 0 {
			t.Fatalf("%s: grow --size=max: exit %d: %s%s", c.name, code, out, errs)
		}
		if err := <-fioDone; err != nil {
			t.Errorf("%s: fio verify across the grow: %v", c.name, err)
		}
		st, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("mdtool: component size of %s has been set to %dK\n", md, st.ComponentSectors/2)
		if errs != want {
			t.Errorf("%s: grow said %q, want %q", c.name, errs, want)
		}
		if st.ComponentSectors <= st0.ComponentSectors || st.Size <= st0.Size {
			t.Fatalf("%s: component size %d -> %d sectors, array %d -> %d bytes: did not grow", c.name,
				st0.ComponentSectors, st.ComponentSectors, st0.Size, st.Size)
		}
		waitFor(t, runDir, md, "resync")
		// The same size again: mdadm's "unchanged".
		code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "-z", "max")
		if want := fmt.Sprintf("mdtool: component size of %s unchanged at %dK\n", md, st.ComponentSectors/2); code != 0 || errs != want {
			t.Errorf("%s: second grow: exit %d, said %q, want %q", c.name, code, errs, want)
		}
		// A new connection sees the new size: fio verify over the added
		// region.
		if err := fioVerify(s.nbdURI(), st0.Size, st.Size-st0.Size); err != nil {
			t.Errorf("%s: fio verify over the added region: %v", c.name, err)
		}
		all := readArray(t, sock, st.Size)
		growArraySizeChecks(t, runDir, md, s.name, st)
		s.stop()
		sameAsHostMdadm(t, c.name+" after --size=max", devs)
		s = serve(t, runDir, md, devs...)
		st2, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if st2.Size != st.Size || st2.ComponentSectors != st.ComponentSectors {
			t.Errorf("%s: assembled again at %d bytes (%d sectors per member), want %d (%d): --array-size kept or size lost",
				c.name, st2.Size, st2.ComponentSectors, st.Size, st.ComponentSectors)
		}
		if got := readArray(t, sock, st.Size); !bytes.Equal(got, all) {
			t.Errorf("%s: assembled again, the array serves other data", c.name)
		}
		s.stop()
		sets = append(sets, kernelCheck{name: c.name, imgs: devs, md5: md5hex(all)})
	}
	if t.Failed() {
		return
	}
	mdvm.Require(t)
	kernelChecks(t, sets)
}

// fioVerify runs a 4k random-write fio job with crc32c verification over
// [off, off+n) of the array through NBD (two connections) and reports an
// error when fio fails or reports a verify error.
func fioVerify(uri string, off, n int64) error {
	per := n / 2 / (64 << 10) * (64 << 10)
	j := fiobench.Job{Name: "grow-verify", RW: "randwrite", BS: "4k", IODepth: 16, NumJobs: 2, Size: per,
		Extra: []string{"--offset=" + strconv.FormatInt(off, 10), "--verify=crc32c", "--do_verify=1",
			"--verify_fatal=1", "--verify_state_save=0"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, out, err := fiobench.Run(ctx, uri, j)
	switch {
	case err != nil:
		return fmt.Errorf("%v\n%s", err, out)
	case strings.Contains(out, "verify:") || strings.Contains(out, "bad magic") || fioErrRe.MatchString(out) || res.Errors != 0:
		return fmt.Errorf("fio reports errors:\n%s", out)
	case res.WriteBytes == 0 || res.ReadBytes == 0:
		return fmt.Errorf("fio wrote %d and verified %d bytes", res.WriteBytes, res.ReadBytes)
	}
	return nil
}

// mkArrayDevs creates an array on fresh member files.
func mkArrayDevs(t *testing.T, dir, md string, opts []string, size int64) []string {
	t.Helper()
	n := 0
	for _, o := range opts {
		if strings.HasPrefix(o, "-n") {
			fmt.Sscanf(o[2:], "%d", &n)
		}
	}
	return mkArray(t, dir, md, n, size, append([]string{"--bitmap=internal", "--bitmap-chunk=1M", "--assume-clean"}, opts...)...)
}

// growArraySizeChecks: --array-size sets a smaller exported size (detail,
// NBD), refuses a size beyond the component sizes, and max restores it.
func growArraySizeChecks(t *testing.T, runDir, md, name string, st *daemon.Status) {
	t.Helper()
	half := st.Size / 2 / 1024
	code, _, errs := mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("--array-size=%d", half))
	if code != 0 {
		t.Fatalf("grow --array-size=%d: exit %d: %s", half, code, errs)
	}
	got, err := queryStatus(runDir, name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != half*1024 {
		t.Errorf("--array-size=%dK: array size %d bytes", half, got.Size)
	}
	if d := detailText(t, runDir, md); !strings.Contains(d, fmt.Sprintf("Array Size : %d ", half)) {
		t.Errorf("--array-size=%dK: detail says:\n%s", half, d)
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("-Z%d", st.Size/1024+1024))
	if code != 1 || errs != "mdtool: --array-size setting is too large.\n" {
		t.Errorf("too large --array-size: exit %d, said %q", code, errs)
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "--array-size=max")
	if code != 0 {
		t.Fatalf("grow --array-size=max: exit %d: %s", code, errs)
	}
	if got, err := queryStatus(runDir, name); err != nil || got.Size != st.Size {
		t.Errorf("--array-size=max: size %v (%v), want %d", got, err, st.Size)
	}
	// Not persistent: set it again, the stop and assembly that follow must
	// forget it.
	if code, _, errs := mdtool(t, "--grow", "--run-dir", runDir, md, fmt.Sprintf("--array-size=%d", half)); code != 0 {
		t.Fatalf("grow --array-size=%d: exit %d: %s", half, code, errs)
	}
}

// TestGrowRaid1Disks: raid1 -n 2 -> 3 with --add in the same command
// (mdadm's order: the device is added, then raid_disks set) rebuilds the
// new mirror; -n 2 is refused while three mirrors are active ("failed to
// set raid disks") and works after one was failed and removed. The
// superblocks read the same by host mdadm --examine and -X; the kernel
// assembles the two-mirror array, check finds 0 mismatches and the same
// contents.
func TestGrowRaid1Disks(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	dir := t.TempDir()
	runDir := dir + "/run"
	md := "/dev/md/growr1n"
	devs := mkArrayDevs(t, dir, md, []string{"-l1", "-n2"}, 24<<20)
	extra := sparse(t, dir, "growr1n-d2.img", 24<<20)
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	sock := daemon.PathsFor(runDir, s.name).NBD()
	st0, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	data := fillRandom(t, sock, 0, st0.Size, 21)
	code, out, errs := mdtool(t, "--grow", "--run-dir", runDir, md, "-n3")
	if code != 1 || !strings.Contains(errs, "Need 1 spare to avoid degraded array, and only have 0.") {
		t.Errorf("-n3 without a spare: exit %d, said %q", code, errs)
	}
	code, out, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "--raid-devices=3", "--add", extra)
	if code != 0 {
		t.Fatalf("grow -n3 --add: exit %d: %s%s", code, out, errs)
	}
	if want := "raid_disks for " + md + " set to 3\n"; out != want {
		t.Errorf("grow -n3 printed %q, want %q", out, want)
	}
	if !strings.Contains(errs, "added "+extra) {
		t.Errorf("grow -n3 --add said %q, want the add", errs)
	}
	d := waitFor(t, runDir, md, "recover")
	if d.ActiveDevices != 3 {
		t.Fatalf("after -n3: %d active devices, want 3", d.ActiveDevices)
	}
	code, out, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "-n2")
	if code != 1 || errs != "mdtool: failed to set raid disks\n" {
		t.Errorf("-n2 with 3 active mirrors: exit %d, said %q%q", code, out, errs)
	}
	manage(t, runDir, md, "--fail", devs[0])
	manage(t, runDir, md, "--remove", devs[0])
	code, out, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "-n2")
	if code != 0 || out != "raid_disks for "+md+" set to 2\n" {
		t.Fatalf("-n2 after fail+remove: exit %d: %q %q", code, out, errs)
	}
	d = detailOf(t, runDir, md)
	if d.ActiveDevices != 2 || len(d.Devices) != 2 {
		t.Errorf("after -n2: %d active, %d devices, want 2 and 2", d.ActiveDevices, len(d.Devices))
	}
	if got := readArray(t, sock, st0.Size); !bytes.Equal(got, data) {
		t.Fatal("the array serves other data after -n3 and -n2")
	}
	s.stop()
	left := []string{devs[1], extra}
	sameAsHostMdadm(t, "raid1 -n 2 -> 3 -> 2", left)
	for _, dv := range left {
		if rd := examineField(hostExamine(t, dv), "Raid Devices"); rd != "2" {
			t.Errorf("%s: Raid Devices %q, want 2", dv, rd)
		}
	}
	mdvm.Require(t)
	kernelChecks(t, []kernelCheck{{name: "r1n", imgs: left, md5: md5hex(data)}})
}

// TestGrowSizeKill9: the daemon is killed (SIGKILL) while `--grow
// --size=max` runs, at a step picked at random each round (after the
// members' own sizes were written, after the bitmap was resized but
// before the superblocks, inside the resync of the added region; the
// test build's MDTOOL_TEST_GROW_SIZE_PAUSE stops the daemon there). After
// re-assembly the array has either the old or the new size, serves the
// data written before, and a check finds 0 mismatches; a few of the sets
// go to the kernel, which assembles them, finds 0 mismatches and the
// same contents.
func TestGrowSizeKill9(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	dir := t.TempDir()
	runDir := dir + "/run"
	steps := []string{"members", "bitmap", "resync"}
	levels := [][]string{{"-l1", "-n2"}, {"-l5", "-n3", "-c64"}, {"-l6", "-n4", "-c64"}, {"-l10", "-n2", "-c64"}}
	rng := rand.New(rand.NewPCG(13, 13))
	var sets []kernelCheck
	seen := map[string]bool{}
	for round := 0; round < 10; round++ {
		step := steps[rng.IntN(len(steps))]
		lv := levels[round%len(levels)]
		md := fmt.Sprintf("/dev/md/k9r%d", round)
		devs := mkArrayDevs(t, dir, md, lv, 16<<20)
		d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_GROW_SIZE_PAUSE="+step)
		st0, err := queryStatus(runDir, d.name)
		if err != nil {
			t.Fatal(err)
		}
		data := fillRandom(t, d.socket(), 0, st0.Size, uint64(round))
		for _, f := range devs {
			if err := os.Truncate(f, 32<<20); err != nil {
				t.Fatal(err)
			}
		}
		growDone := make(chan int, 1)
		go func() {
			code, _, _ := mdtool(t, "--grow", "--run-dir", runDir, md, "--size=max")
			growDone <- code
		}()
		deadline := time.Now().Add(2 * time.Minute)
		for !strings.Contains(d.stderr.String(), "GROW-PAUSE "+step) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the daemon never reached %q:\n%s", round, step, d.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		d.kill()
		<-growDone
		s := serve(t, runDir, md, devs...)
		st, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.ComponentSectors != st0.ComponentSectors && st.ComponentSectors <= st0.ComponentSectors {
			t.Errorf("round %d (%v, killed at %s): component size %d, was %d", round, lv, step, st.ComponentSectors, st0.ComponentSectors)
		}
		t.Logf("round %d (%v): killed at %s; assembled with %d sectors per member (was %d)", round, lv, step, st.ComponentSectors, st0.ComponentSectors)
		sock := daemon.PathsFor(runDir, s.name).NBD()
		if got := readArray(t, sock, st0.Size); !bytes.Equal(got, data) {
			t.Errorf("round %d (%v, killed at %s): the data written before the grow changed", round, lv, step)
		}
		waitIdle(t, runDir, md)
		if code, _, errs := mdtool(t, "action", "--run-dir", runDir, "check", md); code != 0 {
			t.Fatalf("check: exit %d: %s", code, errs)
		}
		if dt := waitFor(t, runDir, md, "check"); dt.Sync.Mismatches != 0 {
			t.Errorf("round %d (%v, killed at %s): check found %d mismatched sectors", round, lv, step, dt.Sync.Mismatches)
		}
		all := readArray(t, sock, st.Size)
		s.stop()
		if !seen[step] || round == 9 {
			seen[step] = true
			sets = append(sets, kernelCheck{name: fmt.Sprintf("k9r%d-%s", round, step), imgs: devs, md5: md5hex(all)})
		}
	}
	if t.Failed() {
		return
	}
	mdvm.Require(t)
	kernelChecks(t, sets)
}

// TestGrowSizeByKernel: the kernel grows arrays (mdadm --grow --size=max
// in the VM, on loop devices over member files that were extended), then
// mdtool assembles the members: it serves the same data at the new size,
// and host mdadm --examine and -X print what mdtool prints, before and
// after mdtool served the array.
func TestGrowSizeByKernel(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	mdvm.Require(t)
	dir := t.TempDir()
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		n    int
		opts string
	}{
		{"kr1", 2, "--level=1"},
		{"kr5", 3, "--level=5 --chunk=64"},
		{"kr10", 2, "--level=10 --chunk=64"},
	}
	var script strings.Builder
	script.WriteString("L=/usr/bin/losetup\n")
	for i, c := range cases {
		var files []string
		for k := 0; k < c.n; k++ {
			f := fmt.Sprintf("%s-%d.img", c.name, k)
			files = append(files, "/share/"+f)
			if err := os.WriteFile(filepath.Join(share, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filepath.Join(share, f), 8<<20); err != nil {
				t.Fatal(err)
			}
		}
		md := fmt.Sprintf("/dev/md%d", i)
		fmt.Fprintf(&script, "D=''\nfor f in %s; do D=\"$D $($L -f --show $f)\"; done\n", strings.Join(files, " "))
		fmt.Fprintf(&script, "mdadm --create %s --run --metadata=1.2 %s --raid-devices=%d --bitmap=internal --bitmap-chunk=1M --assume-clean $D\n",
			md, c.opts, c.n)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=64k 2>/dev/null\nsync\n", md)
		fmt.Fprintf(&script, "old=$(cat /sys/block/md%d/size)\n", i)
		fmt.Fprintf(&script, "for f in %s; do truncate -s 16M $f; done\nfor d in $D; do $L -c $d; done\n", strings.Join(files, " "))
		fmt.Fprintf(&script, "mdadm --grow %s --size=max; echo \"GROW %s rc=$?\"\nmdadm --wait %s\n", md, c.name, md)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=512 seek=$old 2>/dev/null\nsync\n", md)
		fmt.Fprintf(&script, "echo \"RES %s size=$(cat /sys/block/md%d/size) md5=$(md5sum %s | cut -d' ' -f1)\"\n", c.name, i, md)
		fmt.Fprintf(&script, "mdadm --stop %s\nfor d in $D; do $L -d $d; done\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Share: share, Bins: []string{"/usr/sbin/losetup"}, Script: script.String(), Timeout: 900 * time.Second}))
	runDir := filepath.Join(dir, "run")
	for _, c := range cases {
		m := regexp.MustCompile(`(?m)^RES ` + c.name + ` size=(\d+) md5=(\S+)$`).FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "GROW "+c.name+" rc=0") {
			t.Errorf("%s: no result from the guest:\n%s", c.name, out)
			continue
		}
		sectors, _ := strconv.ParseInt(m[1], 10, 64)
		var devs []string
		for k := 0; k < c.n; k++ {
			devs = append(devs, filepath.Join(share, fmt.Sprintf("%s-%d.img", c.name, k)))
		}
		sameAsHostMdadm(t, c.name+" grown by the kernel", devs)
		md := "/dev/md/" + c.name
		s := serve(t, runDir, md, devs...)
		st, err := queryStatus(runDir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != sectors*512 {
			t.Errorf("%s: mdtool serves %d bytes, the kernel %d", c.name, st.Size, sectors*512)
		}
		if got := md5hex(readArray(t, daemon.PathsFor(runDir, s.name).NBD(), st.Size)); got != m[2] {
			t.Errorf("%s: mdtool serves md5 %s, the kernel served %s", c.name, got, m[2])
		}
		s.stop()
		sameAsHostMdadm(t, c.name+" served by mdtool after the kernel's grow", devs)
	}
}

// TestGrowSizeRules: mdadm 4.2's refusals and --assume-clean. A grow
// with --assume-clean starts no resync of the added region; the size
// together with another change, a resync in progress and an array that
// is not running are refused with mdadm's words; a size equal to the
// current one is "no change requested".
func TestGrowSizeRules(t *testing.T) {
	dir := t.TempDir()
	runDir := dir + "/run"
	md := "/dev/md/growrules"
	devs := mkArrayDevs(t, dir, md, []string{"-l1", "-n2"}, 16<<20)
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	st0, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		errs string
	}{
		{[]string{"--size=max", "--chunk=128"}, 1, "mdtool: cannot change component size at the same time as other changes.\n" +
			"   Change size first, then check data is intact before making other changes.\n"},
		{[]string{"--size=0"}, 2, "mdtool: invalid size: 0\n"},
		{[]string{"--array-size=0"}, 2, "mdtool: invalid array size: 0\n"},
		{[]string{fmt.Sprintf("--size=%d", st0.ComponentSectors/2)}, 0, "mdtool: " + md + ": no change requested\n"},
	} {
		code, _, errs := mdtool(t, append([]string{"--grow", "--run-dir", runDir, md}, c.args...)...)
		if code != c.code || errs != c.errs {
			t.Errorf("grow %v: exit %d, said %q; want %d, %q", c.args, code, errs, c.code, c.errs)
		}
	}
	code, _, errs := mdtool(t, "--grow", "--run-dir", runDir, "/dev/md/nosuch", "--size=max")
	if code != 1 || errs != "mdtool: /dev/md/nosuch is not an active md array - aborting\n" {
		t.Errorf("grow of an array not running: exit %d, said %q", code, errs)
	}
	// A check running: mdadm's freeze() refuses.
	if code, _, errs := mdtool(t, "action", "--run-dir", runDir, "--sync-speed-max", "1", "check", md); code != 0 {
		t.Fatalf("check: exit %d: %s", code, errs)
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "--size=max")
	if code != 1 || errs != "mdtool: "+md+" is performing resync/recovery and cannot be reshaped\n" {
		t.Errorf("grow during a check: exit %d, said %q", code, errs)
	}
	if code, _, errs := mdtool(t, "action", "--run-dir", runDir, "--sync-speed-max", "0", "idle", md); code != 0 {
		t.Fatalf("idle: exit %d: %s", code, errs)
	}
	waitIdle(t, runDir, md)
	for _, d := range devs {
		if err := os.Truncate(d, 32<<20); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs = mdtool(t, "--grow", "--run-dir", runDir, md, "--size=max", "--assume-clean")
	if code != 0 {
		t.Fatalf("grow --assume-clean: exit %d: %s", code, errs)
	}
	d := waitIdle(t, runDir, md)
	if d.Sync.LastAction == "resync" {
		t.Errorf("grow --assume-clean resynced the added region")
	}
	st, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	if st.ComponentSectors <= st0.ComponentSectors {
		t.Errorf("grow --assume-clean: %d sectors per member, was %d", st.ComponentSectors, st0.ComponentSectors)
	}
	s.stop()
	if ex := hostOrOwnExamine(t, devs[0]); examineField(ex, "Resync Offset") != "" {
		t.Errorf("after grow --assume-clean and stop, a resync is pending:\n%s", ex)
	}
}

// hostOrOwnExamine is mdtool examine's text of a member.
func hostOrOwnExamine(t *testing.T, dev string) string {
	t.Helper()
	code, out, errs := mdtool(t, "examine", dev)
	if code != 0 {
		t.Fatalf("examine %s: exit %d: %s", dev, code, errs)
	}
	return out
}
