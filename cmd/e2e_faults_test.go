package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/engine"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	fiobench "mdtool/internal/nbdbench"
	"mdtool/superblock"
)

// TestParseFaults: the test-only MDTOOL_TEST_FAULTS syntax, and clear
// errors for what it does not accept.
func TestParseFaults(t *testing.T) {
	good := []struct {
		in   string
		want []faultSpec
	}{
		{"", nil},
		{"/a/d1.img:read=0.01,write=0.002,seed=7;/b/d2.img:dead-after=5000", []faultSpec{
			{Path: "/a/d1.img", Read: 0.01, Write: 0.002, Seed: 7, DeadAfter: -1, hasRead: true, hasWrite: true},
			{Path: "/b/d2.img", Seed: 1, DeadAfter: 5000, hasDead: true},
		}},
		{" x.img:flush=1, skip=10 ,count=3,after=250ms ; ", []faultSpec{
			{Path: "x.img", Flush: 1, Seed: 1, Skip: 10, Count: 3, After: 250 * time.Millisecond, DeadAfter: -1, hasFlush: true},
		}},
		{"C:/odd:name:read=1,off=4096,len=8192", []faultSpec{
			{Path: "C:/odd:name", Read: 1, Seed: 1, Off: 4096, Len: 8192, DeadAfter: -1, hasRead: true, hasOffLen: true},
		}},
		{"d:dead-after=0", []faultSpec{{Path: "d", Seed: 1, DeadAfter: 0, hasDead: true}}},
	}
	for _, c := range good {
		got, err := parseFaults(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseFaults(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"d1.img", `entry 1 "d1.img": want PATH:FAULT,... (no ':')`},
		{":read=0.1", "empty member path"},
		{"d1.img:", "no faults given for d1.img"},
		{"d1.img:read", `"read": want NAME=VALUE`},
		{"d1.img:read=", `"read=": want NAME=VALUE`},
		{"d1.img:read=2", "entry 1 (d1.img): read=2: want a rate in (0, 1]"},
		{"d1.img:write=0", "write=0: want a rate in (0, 1]"},
		{"d1.img:flush=x", "flush=x: want a rate in (0, 1]"},
		{"d1.img:read=0.1,read=0.2", "read given twice"},
		{"d1.img:read=0.1;d1.img:write=0.1", "entry 2: member d1.img given twice"},
		{"d1.img:read=0.1,seed=-1", "seed=-1: want an unsigned integer"},
		{"d1.img:read=0.1,skip=-5", "skip=-5: want a count"},
		{"d1.img:read=0.1,count=0", "count=0: want at least 1"},
		{"d1.img:read=0.1,after=soon", "after=soon: want a duration"},
		{"d1.img:dead-after=1.5", "dead-after=1.5: want a count"},
		{"d1.img:seed=3", "no fault to inject"},
		{"d1.img:dead-after=3,off=0", "off= and len= need a rate"},
		{"d1.img:reed=0.1", `unknown fault "reed"`},
		{"ok.img:read=0.5;d2.img:bogus=1", `entry 2 (d2.img): unknown fault "bogus"`},
	}
	for _, c := range bad {
		got, err := parseFaults(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("parseFaults(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.msg)
		}
	}
}

// TestWrapFaults wraps only the member named, with the rules asked for:
// a dead-after member fails every operation after N, a rate of 1 fails
// every read in its range, and a bad value stops the assembly with the
// reason.
func TestWrapFaults(t *testing.T) {
	dir := t.TempDir()
	a := sparse(t, dir, "a.img", 1<<20)
	b := sparse(t, dir, "b.img", 1<<20)
	open := func(p string) engine.Device {
		d, err := engine.OpenFile(p, engine.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	t.Setenv(faultEnv, a+":dead-after=2;"+dir+"/./b.img:read=1,off=8192,len=4096")
	da := open(a)
	wa, err := wrapFaults(a, da)
	if err != nil {
		t.Fatal(err)
	}
	if wa == da || faultDeviceFor(a) == nil {
		t.Fatalf("%s not wrapped", a)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 4; i++ {
		_, err := wa.ReadAt(buf, 0)
		if (i < 2) != (err == nil) || err != nil && !errors.Is(err, engine.ErrInjected) {
			t.Errorf("dead-after=2: read %d: %v", i, err)
		}
	}
	if err := wa.Flush(); !errors.Is(err, engine.ErrInjected) {
		t.Errorf("dead-after=2: flush after death: %v", err)
	}
	wb, err := wrapFaults(b, open(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		fail bool
	}{{0, false}, {4096, false}, {8192, true}, {8192 + 2048, true}, {12288, false}} {
		if _, err := wb.ReadAt(buf[:2048], c.off); (err != nil) != c.fail {
			t.Errorf("read=1 on [8192,12288): read at %d: %v", c.off, err)
		}
	}
	if _, err := wb.WriteAt(buf, 8192); err != nil {
		t.Errorf("read faults fail writes: %v", err)
	}
	if n := faultDeviceFor(b).Injected.Load(); n != 2 {
		t.Errorf("%d faults injected on b, want 2", n)
	}
	c := sparse(t, dir, "c.img", 1<<20)
	dc := open(c)
	if wc, err := wrapFaults(c, dc); err != nil || wc != dc {
		t.Errorf("member without faults: %v, wrapped %v", err, wc != dc)
	}
	t.Setenv(faultEnv, c+":read=7")
	if _, err := wrapFaults(c, dc); err == nil || !strings.Contains(err.Error(), "read=7: want a rate in (0, 1]") {
		t.Errorf("bad value: %v", err)
	}
	// assemble says why and starts nothing.
	devs := mkArray(t, dir, "/dev/md/flt", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	t.Setenv(faultEnv, devs[1]+":write=0.5,bogus=1")
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", dir, "/dev/md/flt", devs[0], devs[1])
	if code != 1 || !strings.Contains(errs, "mdtool: MDTOOL_TEST_FAULTS: entry 1 ("+devs[1]+`): unknown fault "bogus"`) {
		t.Errorf("assemble with a bad fault spec: exit %d: %s", code, errs)
	}
}

// examineField returns the value of "Field : value" in mdadm --examine
// output (the first occurrence).
func examineField(out, field string) string {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, " : ")
		if ok && strings.TrimSpace(k) == field {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// hostExamine runs the host's mdadm --examine on a member image.
func hostExamine(t *testing.T, img string) string {
	t.Helper()
	requireHostMdadm(t)
	out, err := exec.Command("mdadm", "--examine", img).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm --examine %s: %v\n%s", img, err, out)
	}
	return string(out)
}

// arrayState is the slot string of "Array State : AA.A (...)".
func arrayState(examine string) string {
	s, _, _ := strings.Cut(examineField(examine, "Array State"), " ")
	return s
}

func examineEvents(t *testing.T, examine string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(examineField(examine, "Events"), 10, 64)
	if err != nil {
		t.Fatalf("no event count in:\n%s", examine)
	}
	return n
}

// fioErrRe matches a fio job that ended with an error ("err= 0" is none).
var fioErrRe = regexp.MustCompile(`err=\s*[1-9]`)

// TestFaultInjectionFioVerify runs fio verify jobs (ioengine=nbd,
// verify=crc32c, random and sequential, 4 jobs at iodepth 32) on arrays
// whose members fail reads and writes at random (MDTOOL_TEST_FAULTS):
// within redundancy fio must see no error and no bad block. Afterwards the
// members' superblocks, read by the host's mdadm, record what the kernel
// records: a member whose write failed is faulty in the others'
// superblocks (its slot '.' in Array State), their event count advanced,
// and the faulty member itself was left alone; members with only
// (corrected) read errors stay active.
func TestFaultInjectionFioVerify(t *testing.T) {
	requireHostMdadm(t)
	cases := []struct {
		name   string
		n      int
		opts   []string
		faults map[int]string // member index -> faults
		failed []int          // members that end faulty
	}{
		{"raid1", 2, []string{"-l1", "-n2"}, map[int]string{1: "read=0.01,count=15,write=0.001,skip=64,seed=11"}, []int{1}},
		{"raid5", 4, []string{"-l5", "-n4", "-c", "64"}, map[int]string{2: "read=0.01,count=15,write=0.001,skip=64,seed=12"}, []int{2}},
		{"raid6", 5, []string{"-l6", "-n5", "-c", "64"}, map[int]string{
			1: "read=0.01,count=15,write=0.001,skip=64,seed=13", 3: "read=0.02,count=15,write=0.001,skip=64,seed=14"}, []int{1, 3}},
		{"raid10", 4, []string{"-l10", "-n4", "-c", "64"}, map[int]string{0: "read=0.01,count=15,write=0.001,skip=64,seed=15"}, []int{0}},
		// Read errors only (10 of them): each is corrected by rewriting
		// the block from redundancy; the member stays in sync.
		{"raid5-read-errors", 3, []string{"-l5", "-n3", "-c", "64", "--bitmap=internal"}, map[int]string{1: "read=0.05,count=10,skip=64,seed=16"}, nil},
	}
	// Rates: a faulty member sees ~10^4 writes, so write=0.001 fails it
	// (P(not) ~ e^-10), mid-load; at most 15 read errors (count) keep it
	// under md's max_corrected_read_errors (20), after which md would fail
	// a raid1/10 member for its read errors alone.
	var toKernel []faultedArray
	top := t.TempDir() // outlives the subtests: the kernel gets the images at the end
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(top, c.name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			runDir := filepath.Join(dir, "run")
			md := "/dev/md/" + strings.ReplaceAll(c.name, "-", "")
			devs := mkArray(t, dir, md, c.n, 40<<20, append(c.opts, "--assume-clean")...)
			var spec []string
			for i, f := range c.faults {
				spec = append(spec, devs[i]+":"+f)
			}
			t.Setenv(faultEnv, strings.Join(spec, ";"))
			before := examineEvents(t, hostExamine(t, devs[0]))
			s := serve(t, runDir, md, devs...)
			size := arraySize(t, runDir, s.name)
			per := size / 4 / (1 << 20) * (1 << 20)
			jobs := []fiobench.Job{
				{Name: "randwrite-verify", RW: "randwrite", BS: "4k", IODepth: 32, NumJobs: 4, Size: min(per, 8<<20)},
				{Name: "write-verify", RW: "write", BS: "256k", IODepth: 32, NumJobs: 4, Size: per / (256 << 10) * (256 << 10)},
				{Name: "randrw-verify", RW: "randrw", BS: "16k", IODepth: 32, NumJobs: 4, Size: min(per, 8<<20)},
			}
			for _, j := range jobs {
				j.Extra = []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				res, out, err := fiobench.Run(ctx, s.nbdURI(), j)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v\n%s", j.Name, err, out)
				}
				if strings.Contains(out, "verify:") || strings.Contains(out, "bad magic") || fioErrRe.MatchString(out) {
					t.Errorf("%s: fio reports errors:\n%s", j.Name, out)
				}
				if res.ReadBytes == 0 || res.WriteBytes == 0 {
					t.Errorf("%s: fio wrote %d and verified %d bytes", j.Name, res.WriteBytes, res.ReadBytes)
				}
			}
			injected := map[int]int64{}
			for i := range c.faults {
				fd := faultDeviceFor(devs[i])
				if fd == nil {
					t.Fatalf("member %d was not wrapped in a fault device", i)
				}
				injected[i] = fd.Injected.Load()
				if injected[i] == 0 {
					t.Errorf("member %d: no fault was injected", i)
				}
			}
			t.Logf("faults injected per member: %v", injected)
			st, err := queryStatus(runDir, s.name)
			if err != nil {
				t.Fatal(err)
			}
			faulty := map[int]bool{}
			for _, i := range c.failed {
				faulty[i] = true
			}
			for _, m := range st.Members {
				for i, d := range devs {
					if m.Path == d && (m.State == "faulty") != faulty[i] {
						t.Errorf("daemon status: member %d (%s) is %s", i, d, m.State)
					}
				}
			}
			sum := md5hex(readArray(t, daemon.PathsFor(runDir, s.name).NBD(), size))
			s.stop()
			if len(c.failed) > 0 {
				toKernel = append(toKernel, faultedArray{name: c.name, devs: devs, working: c.n - len(c.failed), md5: sum})
			}

			// The slots of the faulty members, from a survivor's superblock.
			var want []byte
			for i := 0; i < c.n; i++ {
				if faulty[i] {
					want = append(want, '.')
				} else {
					want = append(want, 'A')
				}
			}
			var surv uint64
			for i, d := range devs {
				ex := hostExamine(t, d)
				ev := examineEvents(t, ex)
				if faulty[i] {
					if got := examineField(ex, "Device Role"); !strings.HasPrefix(got, "Active device") {
						t.Errorf("member %d (faulty): role %q: the kernel does not write a failed member's superblock", i, got)
					}
					continue
				}
				if got := arrayState(ex); got != string(want) {
					t.Errorf("member %d: Array State %q, want %q\n%s", i, got, want, ex)
				}
				if st := examineField(ex, "State"); st != "clean" {
					t.Errorf("member %d: State %q after stop, want clean", i, st)
				}
				if surv == 0 {
					surv = ev
				} else if ev != surv {
					t.Errorf("member %d: events %d, other survivors %d", i, ev, surv)
				}
				if len(c.failed) > 0 && ev <= before+1 {
					t.Errorf("member %d: events %d, %d before: a failure must advance them", i, ev, before)
				}
			}
			for _, i := range c.failed {
				if ev := examineEvents(t, hostExamine(t, devs[i])); ev >= surv {
					t.Errorf("faulty member %d: events %d, survivors %d: the failed member must be left behind", i, ev, surv)
				}
				// md's super_1_sync writes MD_DISK_ROLE_FAULTY (0xfffe)
				// for a faulty member into the others' dev_roles.
				num := readSB12(t, devs[i]).DevNumber
				for k, d := range devs {
					if faulty[k] {
						continue
					}
					if sb := readSB12(t, d); int(num) >= len(sb.DevRoles) || sb.DevRoles[num] != superblock.RoleFaulty {
						t.Errorf("member %d: dev_roles[%d] (faulty member %d) is not 0xfffe: %x", k, num, i, sb.DevRoles)
					}
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	kernelAssemblesFaulted(t, toKernel)
}

// faultedArray is the images of an array that lost members to injected
// faults, for the kernel.
type faultedArray struct {
	name    string
	devs    []string
	working int
	md5     string
}

// kernelAssemblesFaulted gives every member image, the failed ones too,
// to mdadm and the kernel: what the superblocks record must make mdadm
// leave the failed members out (they are stale) and start the array
// degraded with the others, serving what mdtool served.
func kernelAssemblesFaulted(t *testing.T, arrays []faultedArray) {
	t.Helper()
	mdvm.Require(t)
	var disks []mdvm.Disk
	var b strings.Builder
	for i, a := range arrays {
		var guest []string
		for _, p := range a.devs {
			guest = append(guest, "/dev/vd"+string(rune('a'+len(disks))))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		md := fmt.Sprintf("/dev/md%d", i)
		fmt.Fprintf(&b, "mdadm --assemble %s %s 2>&1 | sed 's/^/ASM %s /'\n", md, strings.Join(guest, " "), a.name)
		fmt.Fprintf(&b, "echo \"RES %s active=$(cat /sys/block/md%d/md/degraded 2>/dev/null)/$(mdadm --detail %s | sed -n 's/^ *Active Devices : //p') md5=$(md5sum %s | cut -d' ' -f1)\"\n", a.name, i, md, md)
		fmt.Fprintf(&b, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: b.String(), Timeout: 600 * time.Second}))
	for _, a := range arrays {
		m := regexp.MustCompile(`(?m)^RES ` + regexp.QuoteMeta(a.name) + ` active=(\d+)/(\d+) md5=(\S+)$`).FindStringSubmatch(out)
		want := fmt.Sprintf("has been started with %d drive%s (out of %d)", a.working, plural(a.working), len(a.devs))
		switch {
		case m == nil:
			t.Errorf("%s: no result from the kernel:\n%s", a.name, out)
		case !strings.Contains(out, "ASM "+a.name+" mdadm: "):
			t.Errorf("%s: mdadm said nothing:\n%s", a.name, out)
		case !regexp.MustCompile(`(?m)^ASM ` + regexp.QuoteMeta(a.name) + ` mdadm: /dev/md\d+ ` + regexp.QuoteMeta(want)).MatchString(out):
			t.Errorf("%s: mdadm did not say %q:\n%s", a.name, want, out)
		case m[2] != strconv.Itoa(a.working) || m[1] != strconv.Itoa(len(a.devs)-a.working) || m[3] != a.md5:
			t.Errorf("%s: kernel: degraded %s, active %s, md5 %s; want %d, %d, %s (what mdtool served)", a.name, m[1], m[2], m[3], len(a.devs)-a.working, a.working, a.md5)
		default:
			t.Logf("%s: the kernel leaves the failed members out and serves the same data", a.name)
		}
	}
}

// readSB12 reads the v1.2 superblock of a member image.
func readSB12(t *testing.T, img string) *superblock.Superblock {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	if _, err := f.ReadAt(b, 4096); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", img, err)
	}
	return sb
}
