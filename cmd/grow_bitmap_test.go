package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	fiobench "mdtool/internal/nbdbench"
)

// growLevels are the arrays the grow --bitmap tests change: every
// redundant level, every 1.x placement of the bitmap.
var growLevels = []struct {
	name   string
	n      int
	opts   []string
	offset string // the "Internal Bitmap :" line mdadm shows after the add
}{
	{"raid1", 2, []string{"-l1", "-n2", "-e1.2"}, "8 sectors from superblock"},
	{"raid5", 3, []string{"-l5", "-n3", "-c64", "-e1.0"}, "-16 sectors from superblock"},
	{"raid6", 4, []string{"-l6", "-n4", "-c64", "-e1.1"}, "8 sectors from superblock"},
	{"raid10", 4, []string{"-l10", "-n4", "-c64", "-e1.2"}, "8 sectors from superblock"},
}

// growSteps: add a bitmap, remove it, add it again with another chunk
// (4M -> 64M -> 128K), as mdadm's sequence for a new chunk size.
var growSteps = []struct{ bitmap, chunk string }{
	{"internal", "4M"}, {"none", ""}, {"internal", "64M"}, {"none", ""}, {"internal", "128K"},
}

// snapshotMembers copies the member images (sparse) so that mdadm and
// mdtool read the very same bytes while the daemon goes on writing.
func snapshotMembers(t *testing.T, dir, tag string, devs []string) []string {
	t.Helper()
	var out []string
	for i, d := range devs {
		dst := filepath.Join(dir, fmt.Sprintf("%s-%d.img", tag, i))
		if b, err := exec.Command("cp", "--sparse=always", d, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", d, err, b)
		}
		out = append(out, dst)
	}
	return out
}

// hostEnv is an in-process environment whose host name is the host's (so
// that mdtool and host mdadm agree on "local to host").
func hostEnv() (*Env, *lockedBuffer, *lockedBuffer) {
	env, out, errb := daemonEnv()
	env.Hostname = os.Hostname
	return env, out, errb
}

// compareExamine checks that mdtool examine prints what host mdadm
// --examine prints for img, and returns the text.
func compareExamine(t *testing.T, img string) string {
	t.Helper()
	env, out, errb := hostEnv()
	if rc := Main([]string{"--examine", img}, env); rc != 0 {
		t.Fatalf("mdtool -E %s: exit %d: %s", img, rc, errb)
	}
	c := exec.Command("mdadm", "--examine", img)
	c.Env = append(os.Environ(), "TZ=UTC")
	want, err := c.Output()
	if err != nil {
		t.Fatalf("mdadm --examine %s: %v", img, err)
	}
	if string(want) != out.String() {
		t.Errorf("%s: mdtool examine differs from mdadm --examine\n--- mdadm\n%s--- mdtool\n%s", filepath.Base(img), want, out.String())
	}
	return out.String()
}

// compareExamineBitmap runs host mdadm -X and mdtool -X on a read-only
// loop device of img and checks that they print the same (or refuse
// alike); it returns mdtool's output.
func compareExamineBitmap(t *testing.T, img string) string {
	t.Helper()
	b, err := exec.Command("losetup", "-r", "-f", "--show", img).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(b))
	defer exec.Command("losetup", "-d", dev).Run()
	c := exec.Command("mdadm", "-X", dev)
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	rc := 0
	if err := c.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("mdadm -X: %v", err)
		}
		rc = ee.ExitCode()
	}
	env, out, errb := hostEnv()
	got := Main([]string{"-X", dev}, env)
	if got != rc || out.String() != so.String() || strings.ReplaceAll(errb.String(), "mdtool: ", "mdadm: ") != se.String() {
		t.Errorf("-X %s: mdtool exit %d %q %q, mdadm exit %d %q %q", filepath.Base(img), got, out.String(), errb.String(), rc, so.String(), se.String())
	}
	return out.String()
}

// fioDuring runs a fio verify job through NBD while f runs, and fails the
// test on any verify error.
func fioDuring(t *testing.T, uri string, per int64, f func()) {
	t.Helper()
	j := fiobench.Job{Name: "randwrite-verify", RW: "randwrite", BS: "4k", IODepth: 16, NumJobs: 2, Size: per,
		Extra: []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}}
	type result struct {
		res fiobench.Result
		out string
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	go func() {
		res, out, err := fiobench.Run(ctx, uri, j)
		done <- result{res, out, err}
	}()
	f()
	r := <-done
	switch {
	case r.err != nil:
		t.Errorf("fio: %v\n%s", r.err, r.out)
	case r.res.Errors != 0 || strings.Contains(r.out, "verify:") || strings.Contains(r.out, "bad magic"):
		t.Errorf("fio reports errors:\n%s", r.out)
	case r.res.WriteBytes != 2*per || r.res.ReadBytes != 2*per:
		t.Errorf("fio wrote %d and verified %d bytes, want %d each", r.res.WriteBytes, r.res.ReadBytes, 2*per)
	}
}

var reBitmapLine = regexp.MustCompile(`(?m)^ *(Chunksize|Sync Size|Events) : (.*)$`)

// bitmapFacts picks chunk, sync size and events out of -X text.
func bitmapFacts(x string) string {
	var parts []string
	for _, m := range reBitmapLine.FindAllStringSubmatch(x, -1) {
		parts = append(parts, m[1]+"="+strings.TrimSpace(m[2]))
	}
	return strings.Join(parts, " ")
}

// growKernelSet is a member set the kernel assembles at the end.
type growKernelSet struct {
	name   string
	imgs   []string
	md5    string
	chunk  string // "" when the set has no bitmap
	facts  string // Chunksize/Sync Size of mdtool -X
	events string
}

// TestGrowBitmap: on a running array of each redundant level (1.2, 1.0,
// 1.1, 1.2 metadata) with fio verify writing through NBD, grow --bitmap
// adds a 4M bitmap, removes it, adds 64M, removes it and adds 128K. After
// each step host mdadm --examine and -X print what mdtool prints (on
// snapshots of the members); mdadm's refusals are checked; at the end the
// kernel assembles the members (and a snapshot taken after the first
// add), its bitmap has the same chunk and sync size, check finds no
// mismatch and the data is what mdtool served.
func TestGrowBitmap(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	if _, err := exec.LookPath("fio"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("fio is required in CI")
		}
		t.Skip("fio not installed")
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	var sets []growKernelSet
	for _, lv := range growLevels {
		t.Run(lv.name, func(t *testing.T) {
			md := "/dev/md/g" + lv.name
			devs := mkArray(t, dir, md, lv.n, 24<<20, append(lv.opts, "--assume-clean")...)
			s := serve(t, runDir, md, devs...)
			sock := daemon.PathsFor(runDir, s.name).NBD()
			size := arraySize(t, runDir, s.name)
			per := size / 4 / 4096 * 4096
			if code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--bitmap=none"); code != 1 || errs != "mdtool: no bitmap found on "+md+"\n" {
				t.Errorf("--bitmap=none without a bitmap: exit %d %q", code, errs)
			}
			for i, st := range growSteps {
				args := []string{"grow", "--run-dir", runDir, md, "--bitmap=" + st.bitmap}
				if st.chunk != "" {
					args = append(args, "--bitmap-chunk="+st.chunk)
				}
				fioDuring(t, s.nbdURI(), per, func() {
					if code, out, errs := mdtool(t, args...); code != 0 {
						t.Fatalf("%v: exit %d: %s%s", args, code, out, errs)
					}
				})
				tag := fmt.Sprintf("%s-step%d", lv.name, i)
				snap := snapshotMembers(t, dir, tag, devs)
				for _, img := range snap {
					ex := compareExamine(t, img)
					has := strings.Contains(ex, "Internal Bitmap : "+lv.offset+"\n")
					if has != (st.bitmap == "internal") {
						t.Errorf("step %d (%s %s): examine of %s:\n%s", i, st.bitmap, st.chunk, filepath.Base(img), ex)
					}
				}
				x := compareExamineBitmap(t, snap[0])
				if st.bitmap == "internal" {
					want := map[string]string{"4M": "4 MB", "64M": "64 MB", "128K": "128 KB"}[st.chunk]
					if !strings.Contains(x, "Chunksize : "+want+"\n") {
						t.Errorf("step %d: -X after --bitmap-chunk=%s:\n%s", i, st.chunk, x)
					}
				}
				d := detailText(t, runDir, md)
				if strings.Contains(d, "Intent Bitmap : Internal") != (st.bitmap == "internal") {
					t.Errorf("step %d: detail:\n%s", i, d)
				}
				if j := detailJSONOf(t, runDir, md); (j["intent_bitmap"] == "internal") != (st.bitmap == "internal") {
					t.Errorf("step %d: detail --json intent_bitmap %v", i, j["intent_bitmap"])
				}
				if st.bitmap == "internal" {
					// mdadm: a present bitmap is refused, also with another chunk.
					for _, extra := range [][]string{nil, {"--bitmap-chunk=8M"}} {
						a := append([]string{"grow", "--run-dir", runDir, md, "--bitmap=internal"}, extra...)
						if code, _, errs := mdtool(t, a...); code != 1 || errs != "mdtool: bitmap already present on "+md+"\n" {
							t.Errorf("%v with a bitmap: exit %d %q", a, code, errs)
						}
					}
				}
				if i == 0 && (lv.name == "raid1" || lv.name == "raid5") {
					// a set for the kernel: stopped, copied, served again
					data := readArray(t, sock, size)
					s.stop()
					snap := snapshotMembers(t, dir, tag+"-stopped", devs)
					x := compareExamineBitmap(t, snap[0])
					sets = append(sets, growKernelSet{name: tag, imgs: snap, md5: md5hex(data), chunk: "4M", facts: bitmapFacts(x)})
					s = serve(t, runDir, md, devs...)
				}
			}
			data := readArray(t, sock, size)
			s.stop()
			x := compareExamineBitmap(t, devs[0])
			sets = append(sets, growKernelSet{name: lv.name, imgs: devs, md5: md5hex(data), chunk: "128K", facts: bitmapFacts(x)})
		})
	}
	if t.Failed() || len(sets) == 0 {
		return
	}
	growKernelCheck(t, sets)
}

// detailText runs mdtool detail on a running array.
func detailText(t *testing.T, runDir, md string) string {
	t.Helper()
	code, out, errs := mdtool(t, "detail", "--run-dir", runDir, md)
	if code != 0 {
		t.Fatalf("detail %s: exit %d: %s", md, code, errs)
	}
	return out
}

// growKernelCheck assembles every set in one VM run: the bitmap mdadm -X
// shows before the assembly has mdtool's chunk and sync size, the array
// assembles, check finds no mismatch and the contents are mdtool's.
func growKernelCheck(t *testing.T, sets []growKernelSet) {
	t.Helper()
	mdvm.Require(t)
	var disks []mdvm.Disk
	var b strings.Builder
	for i, k := range sets {
		guest := cowDisks(&disks, k.imgs)
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&b, "echo \"XB %s $(mdadm -X %s | grep -E 'Chunksize|Sync Size|Events :' | tr -s ' ' | tr '\\n' '|')\"\n", k.name, guest[0])
		fmt.Fprintf(&b, "mdadm --assemble %s %s || { echo \"ASSEMBLY FAILED %s\"; mdadm --examine %s; }\n",
			md, strings.Join(guest, " "), k.name, strings.Join(guest, " "))
		fmt.Fprintf(&b, "mdadm --wait %s\n", md)
		fmt.Fprintf(&b, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&b, "echo \"RES %s chunk=$(cat %s/bitmap/chunksize) loc=$(cat %s/bitmap/location) mismatch=$(cat %s/mismatch_cnt) last=$(cat %s/last_sync_action) md5=$(md5sum %s | cut -d' ' -f1)\"\n",
			k.name, sys, sys, sys, sys, md)
		fmt.Fprintf(&b, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: b.String(), Timeout: 900 * time.Second}))
	chunkBytes := map[string]string{"4M": "4194304", "64M": "67108864", "128K": "131072"}
	for _, k := range sets {
		m := regexp.MustCompile(`(?m)^RES ` + regexp.QuoteMeta(k.name) + ` chunk=(\S*) loc=(\S*) mismatch=(\S*) last=(\S*) md5=(\S*)$`).FindStringSubmatch(out)
		x := regexp.MustCompile(`(?m)^XB ` + regexp.QuoteMeta(k.name) + ` (.*)$`).FindStringSubmatch(out)
		switch {
		case m == nil || x == nil:
			t.Errorf("%s: no result from the kernel:\n%s", k.name, out)
			continue
		case m[1] != chunkBytes[k.chunk] || m[3] != "0" || m[4] != "check" || m[5] != k.md5:
			t.Errorf("%s: kernel: bitmap chunk %s at %s, mismatch_cnt %s after %s, md5 %s (want %s, 0 after check, %s)",
				k.name, m[1], m[2], m[3], m[4], m[5], chunkBytes[k.chunk], k.md5)
		}
		// mdadm -X in the VM (before the kernel touched it) against
		// mdtool -X: same chunk, sync size and events.
		var vm []string
		for _, f := range strings.Split(x[1], "|") {
			if kv := strings.SplitN(strings.TrimSpace(f), " : ", 2); len(kv) == 2 {
				vm = append(vm, kv[0]+"="+kv[1])
			}
		}
		if got := strings.Join(vm, " "); got != k.facts {
			t.Errorf("%s: bitmap in the VM: %s; mdtool -X: %s", k.name, got, k.facts)
		}
	}
}

// TestGrowBitmapKernelMade is the other direction: mdadm 4.2 grows the
// bitmap of kernel arrays (raid1 1.2, raid5 1.0, raid6 1.1, raid10 1.2) in
// the VM while they hold data: --bitmap=internal --bitmap-chunk=4M, none,
// internal with 64M, none, internal with 128K, with writes in between.
// mdtool then reads the members: examine and -X print what host mdadm
// prints, and mdtool serves the data the kernel served (md5) with a
// check finding 0 mismatches.
func TestGrowBitmapKernelMade(t *testing.T) {
	mdvm.Parallel(t)
	requireHostMdadm(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	var disks []mdvm.Disk
	var script strings.Builder
	type made struct {
		name string
		imgs []string
	}
	var arrays []made
	for i, lv := range growLevels {
		var guest, imgs []string
		for j := 0; j < lv.n; j++ {
			p := sparse(t, dir, fmt.Sprintf("k%s-%d.img", lv.name, j), 24<<20)
			imgs = append(imgs, p)
			guest = append(guest, "/dev/vd"+string(rune('a'+len(disks))))
			disks = append(disks, mdvm.Disk{Path: p})
		}
		arrays = append(arrays, made{lv.name, imgs})
		md := fmt.Sprintf("/dev/md%d", i)
		fmt.Fprintf(&script, "mdadm --create %s --run --assume-clean --homehost=kernel %s %s 2>&1\n", md, strings.Join(lv.opts, " "), strings.Join(guest, " "))
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=1M count=4 oflag=direct 2>/dev/null\n", md)
		for k, st := range growSteps {
			chunk := ""
			if st.chunk != "" {
				chunk = "--bitmap-chunk=" + st.chunk
			}
			fmt.Fprintf(&script, "mdadm --grow %s --bitmap=%s %s || echo \"GROW FAILED %s %d\"\n", md, st.bitmap, chunk, lv.name, k)
			fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=64k count=16 seek=%d oflag=direct 2>/dev/null\n", md, 64+k*32)
		}
		fmt.Fprintf(&script, "echo \"MD5 %s $(md5sum %s | cut -d' ' -f1)\"\n", lv.name, md)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 600 * time.Second}))
	if strings.Contains(out, "GROW FAILED") {
		t.Fatalf("mdadm --grow failed in the VM:\n%s", out)
	}
	for _, a := range arrays {
		t.Run(a.name, func(t *testing.T) {
			m := regexp.MustCompile(`(?m)^MD5 ` + a.name + ` (\S+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no md5 from the VM:\n%s", out)
			}
			for _, img := range a.imgs {
				if ex := compareExamine(t, img); !strings.Contains(ex, "Internal Bitmap : ") {
					t.Errorf("%s: no bitmap after the kernel's grow:\n%s", filepath.Base(img), ex)
				}
			}
			if x := compareExamineBitmap(t, a.imgs[0]); !strings.Contains(x, "Chunksize : 128 KB\n") {
				t.Errorf("-X after the kernel's grow:\n%s", x)
			}
			md := "/dev/md/kk" + a.name
			s := serve(t, runDir, md, a.imgs...)
			size := arraySize(t, runDir, s.name)
			if got := md5hex(readArray(t, daemon.PathsFor(runDir, s.name).NBD(), size)); got != m[1] {
				t.Errorf("mdtool serves md5 %s, the kernel served %s", got, m[1])
			}
			if d := syncAction(t, runDir, md, "check"); d.Sync.Mismatches != 0 {
				t.Errorf("check: %d mismatches", d.Sync.Mismatches)
			}
			s.stop()
		})
	}
}

// TestGrowBitmapRefusals: mdadm 4.2's words and exit statuses for what
// --grow --bitmap refuses (mdadm.c's option checks, Grow_addbitmap), and
// mdadm's own form (--grow MD -b internal) of a change that works.
func TestGrowBitmapRefusals(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	r0 := mkArray(t, dir, "/dev/md/gr0", 2, 8<<20, "-l0", "-n2")
	s0 := serve(t, runDir, "/dev/md/gr0", r0...)
	r1 := mkArray(t, dir, "/dev/md/gr1", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	s1 := serve(t, runDir, "/dev/md/gr1", r1...)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"grow", "/dev/md/gr1", "--bitmap=foo"}, 2,
			"mdtool: bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'foo'\n"},
		{[]string{"grow", "/dev/md/gr1", "--bitmap=internal", "--bitmap-chunk=3K"}, 2, "mdtool: invalid bitmap chunksize: 3K\n"},
		{[]string{"grow", "/dev/md/gr1", "--bitmap=internal", "--size=max"}, 1,
			"mdtool: --bitmap changes cannot be used with other geometry changes in --grow mode\n"},
		{[]string{"grow", "/dev/md/gr1", "--bitmap=internal", r0[0]}, 1,
			"mdtool: --add cannot be used with other geometry changes in --grow mode\n"},
		{[]string{"grow", "/dev/md/gr0", "--bitmap=internal"}, 1, "mdtool: Bitmaps not meaningful with level raid0\n"},
		{[]string{"grow", "/dev/md/gr0", "--bitmap=none"}, 1, "mdtool: no bitmap found on /dev/md/gr0\n"},
		{[]string{"grow", "/dev/md/nosuch", "--bitmap=internal"}, 1, "mdtool: error opening /dev/md/nosuch: No such file or directory\n"},
		{[]string{"grow", "/dev/md/gr1", "--bitmap=internal", "--bitmap-chunk=1K"}, 1,
			"mdtool: failed to create internal bitmap - chunksize problem.\n"},
		{[]string{"--grow", "/dev/md/gr1", "-b", "internal"}, 0, ""},
		{[]string{"-G", "/dev/md/gr1", "--bitmap", "internal", "--bitmap-chunk", "1M"}, 1, "mdtool: bitmap already present on /dev/md/gr1\n"},
	} {
		args := append(c.args, "--run-dir", runDir)
		code, out, errs := mdtool(t, args...)
		if code != c.code || errs != c.err {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want %d, %q", c.args, code, errs, out, c.code, c.err)
		}
	}
	if d := detailText(t, runDir, "/dev/md/gr1"); !strings.Contains(d, "Intent Bitmap : Internal") {
		t.Errorf("detail after --grow -b internal:\n%s", d)
	}
	s0.stop()
	s1.stop()
}
