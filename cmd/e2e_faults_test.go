package cmd

import (
	"context"
	"fmt"
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
	"mdtool/internal/testkit/faults"
	"mdtool/superblock"
)

// useFaults makes the members spec names fault devices in this process
// (internal/testkit/faults) for the rest of the test.
func useFaults(t *testing.T, spec string) {
	t.Helper()
	wrapMember = faults.Wrapper(spec)
	t.Cleanup(func() { wrapMember = nil })
}

// TestAssembleMemberHookError: an error of the member hook (here a bad
// fault specification) stops the assembly with the reason, as it is.
func TestAssembleMemberHookError(t *testing.T) {
	dir := t.TempDir()
	devs := mkArray(t, dir, "/dev/md/flt", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	useFaults(t, devs[1]+":write=0.5,bogus=1")
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", dir, "/dev/md/flt", devs[0], devs[1])
	if code != 1 || !strings.Contains(errs, "mdtool: entry 1 ("+devs[1]+`): unknown fault "bogus"`) {
		t.Errorf("assemble with a bad fault spec: exit %d: %s", code, errs)
	}
	if faults.DeviceFor(devs[1]) != nil {
		t.Errorf("%s wrapped after a bad spec", devs[1])
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
// whose members fail reads and writes at random (internal/testkit/faults):
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
			useFaults(t, strings.Join(spec, ";"))
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
				fd := faults.DeviceFor(devs[i])
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
