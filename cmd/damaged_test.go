package cmd

import (
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/superblock"
)

// Damaged members: a corpus of single-field damages to member 1 of a fresh
// 4 x 64 MiB raid5 with an internal bitmap (metadata 1.2: superblock at
// byte 4096, bitmap 8 sectors after it, data at sector 4096).

const (
	dmgSize   = 64 << 20
	dmgSBOff  = 4096
	dmgBMOff  = dmgSBOff + 8*512
	dmgMember = 1
)

// dmgCase is one damage and what must become of the damaged member.
type dmgCase struct {
	name string
	// edit damages the member file.
	edit func(t *testing.T, path string)
	// field: the member fails superblock validation; assemble leaves it
	// out with "failed to add ... (invalid superblock: FIELD ...".
	field string
	// kernelTakes: Linux 6.1 does not refuse this member when it loads
	// it (mdtool is stricter).
	kernelTakes bool
	// kernel: what `mdadm --assemble --run` of the set does in the
	// Linux 6.1 VM (TestDamagedMembersKernel): "rc=N in=I,J,..." with
	// the indexes of the members the array holds; "" is "rc=1 in=" for
	// an abort and "rc=0 in=0,2,3" for a member that fails validation
	// (the kernel refuses it as mdtool does).
	kernel string
	// abort: mdadm's select_devices refuses the whole set with this
	// message (compare_super1 or no superblock); nothing starts.
	abort string
	// addRefused: --add to a running array refuses the member with
	// this message (else it is added as a new spare, as mdadm does).
	addRefused string
	// started: the drives assemble --run starts the array with when
	// neither field nor abort is set.
	started int
}

// sbEdit edits the superblock area of the member and, if fix, stores a
// correct checksum, so that only the edited field is wrong.
func sbEdit(fix bool, f func(b []byte)) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		patchFile(t, path, dmgSBOff, func(b []byte) {
			f(b[:4096])
			if fix {
				putLE32(b, 0xD8, superblock.Checksum(b[:4096]))
			}
		})
	}
}

func dmgCases() []dmgCase {
	return []dmgCase{
		{name: "checksum", edit: sbEdit(false, func(b []byte) { b[0xD8] ^= 0x5a }), field: "sb_csum"},
		{name: "data_offset-zero", edit: sbEdit(true, func(b []byte) { putLE64(b, 0x80, 0) }), field: "data_offset"},
		{name: "data_offset-in-superblock", edit: sbEdit(true, func(b []byte) { putLE64(b, 0x80, 8) }), field: "data_offset"},
		// The kernel loads it, then the bitmap overlapping the data makes
		// RUN_ARRAY fail ("disabling internal bitmap due to errors",
		// rc=1) and, in one VM run of two, the error path panicked the
		// guest (mempool_free): not sent to the kernel. mdtool leaves
		// the member out and starts.
		{name: "data_offset-in-bitmap", edit: sbEdit(true, func(b []byte) { putLE64(b, 0x80, 16) }), field: "bitmap_offset", kernelTakes: true,
			kernel: "skip"},
		{name: "new_offset-in-superblock", edit: sbEdit(true, func(b []byte) {
			putLE32(b, 0x08, binary.LittleEndian.Uint32(b[0x08:])|superblock.FeatureReshapeActive|superblock.FeatureNewOffset)
			putLE32(b, 0x7C, uint32(0xFFFFF000)) // -4096: new data at sector 0
		}), field: "new_offset"},
		{name: "pad0", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x0C, 1) }), field: "pad0"},
		{name: "pad3", edit: sbEdit(true, func(b []byte) { b[0xF7] = 0x80 }), field: "pad3"},
		{name: "feature-unknown", edit: sbEdit(true, func(b []byte) {
			putLE32(b, 0x08, binary.LittleEndian.Uint32(b[0x08:])|1<<20)
		}), field: "feature_map"},
		{name: "feature-raid0-layout", edit: sbEdit(true, func(b []byte) {
			putLE32(b, 0x08, binary.LittleEndian.Uint32(b[0x08:])|superblock.FeatureRAID0Layout)
		}), field: "feature_map"},
		{name: "badblocks-no-offset", edit: sbEdit(true, func(b []byte) {
			putLE32(b, 0x08, binary.LittleEndian.Uint32(b[0x08:])|superblock.FeatureBadBlocks)
			putLE32(b, 0xBC, 0)
		}), field: "bblog_offset"},
		// mdadm 4.2 crashes (SIGSEGV) on it, in --examine and --assemble.
		{name: "max_dev-huge", edit: sbEdit(true, func(b []byte) { putLE32(b, 0xDC, 0xffffffff) }), field: "max_dev", kernel: "rc=139 in="},
		{name: "max_dev-1921", edit: sbEdit(true, func(b []byte) { putLE32(b, 0xDC, superblock.MaxDevs+1) }), field: "max_dev"},
		{name: "data_size-small", edit: sbEdit(true, func(b []byte) { putLE64(b, 0x88, 9) }), field: "data_size"},
		{name: "data_size-beyond-device", edit: sbEdit(true, func(b []byte) {
			putLE64(b, 0x88, binary.LittleEndian.Uint64(b[0x88:])+8)
		}), field: "data_size"},
		// The kernel uses the freshest member's bitmap_offset for all
		// and takes this one; mdtool refuses it.
		{name: "bitmap_offset-outside", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x60, 0x7fffff00) }), field: "bitmap_offset",
			kernelTakes: true, kernel: "rc=0 in=0,1,2,3"},
		{name: "journal-role", edit: sbEdit(true, func(b []byte) {
			putLE16(b, 0x100+2*int(binary.LittleEndian.Uint32(b[0xA0:])), superblock.RoleJournal)
		}), field: "dev_roles"},
		{name: "truncated", edit: func(t *testing.T, path string) {
			if err := os.Truncate(path, dmgSize/2); err != nil {
				t.Fatal(err)
			}
		}, field: "data_size", addRefused: "not large enough to join array"},
		// Not per-member rules: mdadm compares the superblocks
		// (compare_super1) and aborts.
		{name: "raid_disks-huge", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x5C, 0xffffffff) }), abort: "doesn't match others"},
		{name: "chunk-bad", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x58, 3) }), abort: "doesn't match others"},
		{name: "level-99", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x48, 99) }), abort: "doesn't match others"},
		{name: "uuid-mismatch", edit: sbEdit(true, func(b []byte) { b[0x10] ^= 0xff }), abort: "doesn't match others"},
		{name: "major_version", edit: sbEdit(true, func(b []byte) { putLE32(b, 0x04, 2) }), abort: "has no superblock - assembly aborted"},
		{name: "empty-file", edit: func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, abort: "has no superblock - assembly aborted"},
		// Accepted by the kernel and by mdtool.
		// mdadm counts it as faulty; the kernel keeps it as a spare,
		// mdtool leaves it out.
		{name: "dev_number-beyond-max_dev", edit: sbEdit(true, func(b []byte) { putLE32(b, 0xA0, 1000) }), started: 3,
			kernel: "rc=0 in=0,1,2,3"},
		{name: "bitmap-magic", edit: func(t *testing.T, path string) {
			patchFile(t, path, dmgBMOff, func(b []byte) { putLE32(b, 0, 0) })
		}, started: 4, kernel: "rc=0 in=0,1,2,3"},
		{name: "bitmap-uuid", edit: func(t *testing.T, path string) {
			patchFile(t, path, dmgBMOff, func(b []byte) { b[8] ^= 0xff })
		}, started: 4, kernel: "rc=0 in=0,1,2,3"},
	}
}

// dmgPristine creates the undamaged array (metadata only) in dir.
func dmgPristine(t *testing.T, dir string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var devs []string
	for i := 0; i < 4; i++ {
		devs = append(devs, sparse(t, dir, "p"+string(rune('0'+i))+".img", dmgSize))
	}
	args := append([]string{"create", "/dev/md/dmg", "--start=false", "--homehost=testhost", "--assume-clean",
		"-l5", "-n4", "--bitmap=internal"}, devs...)
	if code, _, errs := mdtool(t, args...); code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	return devs
}

// dmgSet copies the pristine members into dir and damages member 1.
func dmgSet(t *testing.T, pristine []string, dir string, c dmgCase) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var devs []string
	for i, p := range pristine {
		d := filepath.Join(dir, filepath.Base(p))
		if out, err := exec.Command("cp", "--sparse=always", p, d).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if i == dmgMember {
			c.edit(t, d)
		}
		devs = append(devs, d)
	}
	return devs
}

// hostExamineCapped runs host mdadm --examine on path and returns its output
// (at most 256 KiB), its exit status and whether the output was whole.
func hostExamineCapped(t *testing.T, conf, path string) (string, int, bool) {
	t.Helper()
	const max = 256 << 10
	cmd := exec.Command("mdadm", "--examine", "--config="+conf, path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("host mdadm: %v", err)
	}
	b, _ := io.ReadAll(io.LimitReader(out, max+1))
	whole := len(b) <= max
	if !whole {
		cmd.Process.Kill()
		b = b[:max]
	}
	err = cmd.Wait()
	if !whole {
		return string(b), -1, false
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("host mdadm: %v", err)
	}
	return string(b), code, true
}

// within runs f and fails the test if it does not return within d (a
// hang, not a slow machine: d is generous).
func within(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// oneLine reports whether s is exactly one non-empty line.
func oneLine(s string) bool {
	return s != "" && strings.Count(s, "\n") == 1 && strings.HasSuffix(s, "\n")
}

// TestDamagedMembers runs every damaged member through examine, -X,
// assemble (then detail and stop) and --re-add/--add on a running array.
func TestDamagedMembers(t *testing.T) {
	dir := t.TempDir()
	pristine := dmgPristine(t, filepath.Join(dir, "pristine"))
	host, _ := os.Hostname()
	conf := emptyConf(t)
	const limit = 2 * time.Minute
	for _, c := range dmgCases() {
		t.Run(c.name, func(t *testing.T) {
			cdir := filepath.Join(dir, c.name)
			devs := dmgSet(t, pristine, cdir, c)
			bad := devs[dmgMember]
			h0 := sparseHash(t, bad)

			// examine: what host mdadm 4.2 prints, and its exit status.
			var r runResult
			within(t, "examine", limit, func() { r = runMdtool(t, host, "examine", "--config", conf, bad) })
			mout, mcode, whole := hostExamineCapped(t, conf, bad)
			got := r.stdout
			if whole && mcode < 0 {
				// mdadm 4.2 crashes (SIGSEGV with max_dev 0xffffffff):
				// nothing to compare, mdtool must just print and end.
				t.Logf("host mdadm --examine died by a signal; mdtool exit %d", r.code)
				mout, got = "", ""
			} else if !whole {
				// mdadm prints a line of raid_disks characters (4 G
				// with raid_disks 0xffffffff); compare the start.
				if len(got) > len(mout) {
					got = got[:len(mout)]
				}
			} else if r.code != mcode {
				t.Errorf("examine exit %d, mdadm's %d; stderr %q", r.code, mcode, r.stderr)
			}
			if d := diffText(mout, got); d != "" {
				t.Errorf("examine differs from host mdadm's:\n%s", d)
			}
			if c.field == "sb_csum" && !strings.Contains(r.stdout, " - expected ") {
				t.Errorf("examine does not show the bad checksum:\n%s", r.stdout)
			}
			if c.field != "" {
				within(t, "examine --json", limit, func() { r = runMdtool(t, host, "examine", "--json", "--config", conf, bad) })
				if !strings.Contains(r.stdout, `"field": "`+c.field+`"`) && !strings.Contains(r.stdout, `"field":"`+c.field+`"`) {
					t.Errorf("examine --json does not report %s:\n%s", c.field, r.stdout)
				}
			}
			// -X: mdadm's texts (several lines when there is no
			// bitmap); it must end and change nothing.
			within(t, "examine-bitmap", limit, func() { r = runMdtool(t, host, "examine-bitmap", bad) })
			if r.code != 0 && r.code != 1 && r.code != 2 {
				t.Errorf("examine-bitmap exit %d: %s", r.code, r.stderr)
			}
			if sparseHash(t, bad) != h0 {
				t.Fatalf("examine changed %s", bad)
			}

			// assemble --run, then detail and stop.
			runDir := filepath.Join(cdir, "run")
			md := "/dev/md/dmg"
			before := hashAll(t, devs)
			var s *served
			var code int
			within(t, "assemble", limit, func() {
				s, code = tryServe(t, runDir, md, append([]string{"--run"}, devs...)...)
			})
			switch {
			case c.abort != "":
				if s != nil {
					t.Fatalf("assembled, want %q", c.abort)
				}
				if code != 1 {
					t.Errorf("assemble exit %d, want 1", code)
				}
				after := hashAll(t, devs)
				for p, h := range before {
					if after[p] != h {
						t.Errorf("assemble refused but changed %s", p)
					}
				}
			case s == nil:
				t.Fatalf("assemble --run ended with %d", code)
			default:
				errs := s.stderr.String()
				want := 4
				if c.field != "" {
					want = 3
					line := "mdtool: failed to add " + bad + " to " + md + ": Invalid argument (invalid superblock: " + c.field + " "
					if strings.Count(errs, line) != 1 {
						t.Errorf("assemble stderr lacks one %q:\n%s", line, errs)
					}
				} else {
					want = c.started
				}
				started := "has been started with " + map[int]string{3: "3 drives (out of 4)", 4: "4 drives"}[want]
				if !strings.Contains(errs, started) {
					t.Errorf("assemble stderr lacks %q:\n%s", started, errs)
				}
				var dcode int
				var dout, derr string
				within(t, "detail", limit, func() { dcode, dout, derr = mdtool(t, "detail", "--run-dir", runDir, md) })
				if dcode != 0 {
					t.Errorf("detail exit %d: %s", dcode, derr)
				}
				if c.field != "" && strings.Contains(dout, bad) {
					t.Errorf("detail lists the refused member:\n%s", dout)
				}
				// A running array's detail does not depend on one
				// member's superblock on disk: damage member 0's.
				sbEdit(true, func(b []byte) { putLE32(b, 0xDC, 0xffffffff) })(t, devs[0])
				within(t, "detail", limit, func() { dcode, dout, derr = mdtool(t, "detail", "--run-dir", runDir, md) })
				if dcode != 0 || !strings.Contains(dout, "Raid Level : raid5") {
					t.Errorf("detail with member 0's superblock damaged: exit %d: %s%s", dcode, derr, dout)
				}
				within(t, "stop", limit, s.stop)
				if c.field != "" && sparseHash(t, bad) != h0 {
					t.Errorf("the refused member %s was written", bad)
				}
			}

			// --re-add and --add to a running array made of the three
			// other members.
			if c.field == "" {
				return
			}
			devs = dmgSet(t, pristine, filepath.Join(cdir, "add"), c)
			bad = devs[dmgMember]
			h0 = sparseHash(t, bad)
			others := []string{devs[0], devs[2], devs[3]}
			within(t, "assemble", limit, func() { s = serve(t, runDir, md, append([]string{"--run"}, others...)...) })
			var errs string
			within(t, "re-add", limit, func() { code, _, errs = mdtool(t, md, "--re-add", bad, "--run-dir", runDir) })
			if code == 0 || !oneLine(errs) {
				t.Errorf("--re-add: exit %d, stderr %q; want a one-line refusal", code, errs)
			}
			if sparseHash(t, bad) != h0 {
				t.Errorf("--re-add refused but changed %s", bad)
			}
			within(t, "add", limit, func() { code, _, errs = mdtool(t, md, "--add", bad, "--run-dir", runDir) })
			if c.addRefused != "" {
				if code != 1 || errs != "mdtool: "+bad+" "+c.addRefused+"\n" {
					t.Errorf("--add: exit %d, stderr %q, want %q", code, errs, c.addRefused)
				}
				if sparseHash(t, bad) != h0 {
					t.Errorf("--add refused but changed %s", bad)
				}
			} else if code != 0 || errs != "mdtool: added "+bad+"\n" {
				// mdadm --add writes a new superblock when the re-add
				// fails.
				t.Errorf("--add: exit %d, stderr %q", code, errs)
			}
			within(t, "detail", limit, func() { code, _, errs = mdtool(t, "detail", "--run-dir", runDir, md) })
			if code != 0 {
				t.Errorf("detail after --add: exit %d: %s", code, errs)
			}
			within(t, "stop", limit, s.stop)
		})
	}
}

// TestDamagedMemberNoRun: without --run, a refused member makes the set
// one short, as mdadm says after the kernel refused it; the refused
// member here is member 0, the one the others would be compared with.
func TestDamagedMemberNoRun(t *testing.T) {
	dir := t.TempDir()
	pristine := dmgPristine(t, filepath.Join(dir, "pristine"))
	c := dmgCases()[0] // checksum
	devs := dmgSet(t, pristine, filepath.Join(dir, "set"), c)
	bad := devs[dmgMember]
	// Put the damaged member first.
	devs[0], devs[dmgMember] = devs[dmgMember], devs[0]
	before := hashAll(t, devs)
	md := "/dev/md/dmg"
	var code int
	var errs string
	within(t, "assemble", 2*time.Minute, func() {
		code, _, errs = mdtool(t, append([]string{"assemble", "--foreground", "--run-dir", filepath.Join(dir, "run"), md}, devs...)...)
	})
	want := "mdtool: failed to add " + bad + " to " + md + ": Invalid argument (invalid superblock: sb_csum "
	if code != 1 || !strings.HasPrefix(errs, want) ||
		!strings.HasSuffix(errs, "\nmdtool: "+md+" assembled from 3 drives - need all 4 to start it (use --run to insist).\n") ||
		strings.Count(errs, "\n") != 2 {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
	after := hashAll(t, devs)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
}
