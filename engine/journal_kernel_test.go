package engine

import (
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelJournalCrash: arrays with a write journal that the kernel
// crashed in the middle of writes (mdvm-crash: the guest dies, nothing is
// flushed or stopped) are recovered by the engine exactly as by the
// kernel. Three arrays crash in one boot: raid5 and raid6 in md's default
// write-through mode (the log holds data and parity of stripes not yet on
// the members) and raid5 in write-back mode (the log holds data the
// members never got). The engine opens copies of the crashed images: its
// log line ("recovering N data-only stripes and M data-parity stripes")
// is the kernel's, the whole array reads as the kernel reads it after its
// own recovery of the same images (md5), and a check finds no mismatch.
// The kernel then assembles the images the engine recovered: it finds no
// data left only in the log (at most the newest io_unit, which md's tail
// also keeps), its check finds no mismatch and it reads the same md5.
func TestKernelJournalCrash(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	type set struct {
		name, level string
		n           int
		writeBack   bool
		imgs        []string
	}
	sets := []*set{
		{name: "r5wt", level: "5", n: 4},
		{name: "r6wt", level: "6", n: 5},
		{name: "r5wb", level: "5", n: 4, writeBack: true},
	}
	var disks []mdvm.Disk
	var sc strings.Builder
	sc.WriteString("i=0; while [ $i -lt 2048 ]; do printf \"%-4095s\\n\" \"block $i\"; i=$((i+1)); done > /tmp/pat\n")
	dev := func() string { return "/dev/vd" + string(rune('a'+len(disks))) }
	for k, s := range sets {
		var members []string
		for i := 0; i <= s.n; i++ {
			size := int64(12 << 20)
			if i == s.n {
				size = 8 << 20
			}
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.img", s.name, i))
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, size); err != nil {
				t.Fatal(err)
			}
			s.imgs = append(s.imgs, p)
			members = append(members, dev())
			disks = append(disks, mdvm.Disk{Path: p})
		}
		md := fmt.Sprintf("/dev/md%d", k)
		fmt.Fprintf(&sc, "mdadm -CR %s -l%s -n%d -c64 --assume-clean %s --write-journal %s >/dev/null 2>&1 || echo CREATE-FAILED %s\n",
			md, s.level, s.n, strings.Join(members[:s.n], " "), members[s.n], s.name)
		if s.writeBack {
			fmt.Fprintf(&sc, "echo write-back > /sys/block/md%d/md/journal_mode\n", k)
		}
		// Some writes that complete, then more in flight at the crash.
		fmt.Fprintf(&sc, "dd if=/tmp/pat of=%s bs=64k count=40 oflag=direct 2>/dev/null\n", md)
		fmt.Fprintf(&sc, "for b in 3 7 11 500 501 900; do dd if=/tmp/pat of=%s bs=4k count=1 skip=$((b+1000)) seek=$b oflag=direct 2>/dev/null; done\n", md)
		fmt.Fprintf(&sc, "(dd if=/tmp/pat of=%s bs=64k skip=8 seek=48 count=64 oflag=direct 2>/dev/null &)\n", md)
	}
	sc.WriteString("sleep 0.3\nmdvm-crash 0\n")
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second})
	if strings.Contains(string(out), "FAILED") {
		t.Fatalf("crash boot:\n%s", out)
	}

	// The engine on copies of the crashed images.
	logRe := regexp.MustCompile(`recovering \d+ data-only stripes and \d+ data-parity stripes|starting from clean shutdown`)
	engineMD5 := map[string]string{}
	engineLog := map[string]string{}
	recovered := map[string][]string{}
	for _, s := range sets {
		var cp []string
		for i, p := range s.imgs {
			c := filepath.Join(dir, fmt.Sprintf("%s-mt-%d.img", s.name, i))
			copyImage(t, p, c)
			cp = append(cp, c)
		}
		recovered[s.name] = cp
		o := recoverOptions()
		o.Name = "md"
		logs := captureLog(&o)
		var ds []Device
		for _, p := range cp {
			d, err := OpenFile(p, FileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		a, err := Open(ds, o)
		if err != nil {
			t.Fatalf("%s: open: %v", s.name, err)
		}
		engineMD5[s.name] = arrayMD5(t, a)
		if mm, err := a.Check(t.Context(), false); err != nil || mm != 0 {
			t.Errorf("%s: the engine's check after its recovery: %d mismatches, %v", s.name, mm, err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		engineLog[s.name] = logRe.FindString(strings.Join(logs(), "\n"))
	}

	// The kernel: its own recovery of the crashed images (copy-on-write),
	// then, in a second boot, the engine's recovered images.
	var out2 []byte
	for _, tag := range []string{"K", "M"} {
		disks = disks[:0]
		sc.Reset()
		for k, s := range sets {
			imgs := s.imgs
			if tag == "M" {
				imgs = recovered[s.name]
			}
			var members []string
			for _, p := range imgs {
				members = append(members, dev())
				disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
			}
			md := fmt.Sprintf("/dev/md%d", k)
			sys := fmt.Sprintf("/sys/block/md%d/md", k)
			fmt.Fprintf(&sc, "dmesg -c >/dev/null; mdadm -A %s %s >/dev/null 2>&1 || echo ASSEMBLE-FAILED %s %s\n", md, strings.Join(members, " "), tag, s.name)
			fmt.Fprintf(&sc, "echo \"%s %s LOG $(dmesg | grep -o 'recovering.*stripes\\|starting from clean shutdown')\"\n", tag, s.name)
			fmt.Fprintf(&sc, "echo \"%s %s MD5 $(md5sum < %s | cut -d' ' -f1)\"\n", tag, s.name, md)
			fmt.Fprintf(&sc, "mdadm --wait %s; echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", md, sys, md)
			fmt.Fprintf(&sc, "echo \"%s %s MISMATCH $(cat %s/mismatch_cnt)\"\n", tag, s.name, sys)
			fmt.Fprintf(&sc, "mdadm -S %s >/dev/null 2>&1\n", md)
		}
		out2 = append(out2, mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second})...)
	}
	field := func(tag, name, key string) string {
		m := regexp.MustCompile(`(?m)^` + tag + ` ` + name + ` ` + key + ` ?(.*)$`).FindStringSubmatch(string(out2))
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	replayed := false
	for _, s := range sets {
		klog := field("K", s.name, "LOG")
		t.Logf("%s: kernel: %q, engine: %q; md5 kernel %s engine %s", s.name, klog, engineLog[s.name], field("K", s.name, "MD5"), engineMD5[s.name])
		if klog != engineLog[s.name] {
			t.Errorf("%s: the kernel's recovery says %q, the engine's %q", s.name, klog, engineLog[s.name])
		}
		if strings.HasPrefix(klog, "recovering") && !strings.HasPrefix(klog, "recovering 0 data-only stripes and 0 ") {
			replayed = true
		}
		if got := field("K", s.name, "MD5"); got != engineMD5[s.name] {
			t.Errorf("%s: the kernel reads md5 %s after its recovery, the engine %s after its own", s.name, got, engineMD5[s.name])
		}
		if got := field("K", s.name, "MISMATCH"); got != "0" {
			t.Errorf("%s: the kernel's check after its recovery: %q", s.name, got)
		}
		// The engine's tail, like md's, is the newest io_unit on the
		// members (replayed again, harmlessly); no data is left only in
		// the log.
		if got := field("M", s.name, "LOG"); got != "starting from clean shutdown" && !strings.HasPrefix(got, "recovering 0 data-only stripes") {
			t.Errorf("%s: the kernel on the engine's recovered images: %q, want no data-only stripes", s.name, got)
		}
		if got := field("M", s.name, "MD5"); got != engineMD5[s.name] {
			t.Errorf("%s: the kernel reads md5 %s from the engine's recovered images, the engine read %s", s.name, got, engineMD5[s.name])
		}
		if got := field("M", s.name, "MISMATCH"); got != "0" {
			t.Errorf("%s: the kernel's check of the engine's recovered images: %q", s.name, got)
		}
	}
	if !replayed {
		t.Errorf("no crash left anything in a log to replay: the test proves nothing (crash sooner)\n%s", out2)
	}
	if t.Failed() {
		t.Logf("guest output:\n%s\n%s", out, out2)
	}
}

func copyImage(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKernelJournalWriteBackCrash: the engine's own write-back logs, as a
// crash leaves them, are recovered by the kernel. raid5 and raid6 arrays
// in write-back mode take a workload that writes the cache out many
// times and then crash (every device copied at one instant while the
// cache holds data the members never got). The engine recovers copies
// of the images; Linux 6.1 assembles the crashed images themselves
// (copy-on-write): its recovery line equals the engine's (the same
// data-only and data-parity stripe counts, so the kernel reads every
// io_unit the engine wrote), it reads the array as written (the md5 of
// what the workload wrote), and its check finds no mismatch.
func TestKernelJournalWriteBackCrash(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	specs := []spec{
		{level: "raid5", n: 4, chunkKiB: 64, journal: true, devMiB: []int{12, 12, 12, 12, 8}},
		{level: "raid6", n: 5, chunkKiB: 16, journal: true, devMiB: []int{12, 12, 12, 12, 12, 8}},
	}
	var disks []mdvm.Disk
	var sc strings.Builder
	want := map[int]string{}
	engineLog := map[int]string{}
	logRe := regexp.MustCompile(`recovering \d+ data-only stripes and \d+ data-parity stripes|starting from clean shutdown`)
	for k, s := range specs {
		mems := create(t, s)
		a := open(t, mems, recoverOptions())
		if err := a.SetJournalMode(JournalWriteBack); err != nil {
			t.Fatal(err)
		}
		m := newModel(a.Size())
		workload(t, a, m, uint64(70+k), 400)
		if !a.jnl.cached() || a.jnl.c.epoch.Load() == 0 {
			t.Fatalf("%v: cached %v, written out %d times: the crash proves nothing", s, a.jnl.cached(), a.jnl.c.epoch.Load())
		}
		crash := cloneMems(t, mems)
		a.Close()
		want[k] = fmt.Sprintf("%x", md5.Sum(m.b))
		var members []string
		for i, c := range crash {
			b := make([]byte, c.Geometry().Size)
			if _, err := c.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, fmt.Sprintf("%d-%d.img", k, i))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			members = append(members, "/dev/vd"+string(rune('a'+len(disks))))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		// The engine's recovery of the same images.
		o := recoverOptions()
		o.Name = "md"
		logs := captureLog(&o)
		b := open(t, cloneMems(t, crash), o)
		if got := arrayMD5(t, b); got != want[k] {
			t.Errorf("%v: the engine reads md5 %s after its recovery, the workload wrote %s", s, got, want[k])
		}
		b.Close()
		engineLog[k] = logRe.FindString(strings.Join(logs(), "\n"))
		if !strings.HasPrefix(engineLog[k], "recovering ") || strings.HasPrefix(engineLog[k], "recovering 0 data-only") {
			t.Fatalf("%v: the engine's recovery: %q, want data-only stripes", s, engineLog[k])
		}
		md := fmt.Sprintf("/dev/md%d", k)
		sys := fmt.Sprintf("/sys/block/md%d/md", k)
		fmt.Fprintf(&sc, "dmesg -c >/dev/null; mdadm -A %s %s >/dev/null 2>&1 || echo ASSEMBLE-FAILED %d\n", md, strings.Join(members, " "), k)
		fmt.Fprintf(&sc, "echo \"%d LOG $(dmesg | grep -o 'recovering.*stripes\\|starting from clean shutdown')\"\n", k)
		fmt.Fprintf(&sc, "echo \"%d MD5 $(md5sum < %s | cut -d' ' -f1)\"\n", k, md)
		fmt.Fprintf(&sc, "mdadm --wait %s; echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", md, sys, md)
		fmt.Fprintf(&sc, "echo \"%d MISMATCH $(cat %s/mismatch_cnt)\"\n", k, sys)
		fmt.Fprintf(&sc, "mdadm -S %s >/dev/null 2>&1\n", md)
	}
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second})
	field := func(k int, key string) string {
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^%d %s ?(.*)$`, k, key)).FindStringSubmatch(string(out))
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	for k, s := range specs {
		t.Logf("%v: kernel %q, engine %q", s, field(k, "LOG"), engineLog[k])
		if got := field(k, "LOG"); got != engineLog[k] {
			t.Errorf("%v: the kernel's recovery says %q, the engine's %q", s, got, engineLog[k])
		}
		if got := field(k, "MD5"); got != want[k] {
			t.Errorf("%v: the kernel reads md5 %s after its recovery, the workload wrote %s", s, got, want[k])
		}
		if got := field(k, "MISMATCH"); got != "0" {
			t.Errorf("%v: the kernel's check after its recovery: %q", s, got)
		}
	}
	if strings.Contains(string(out), "FAILED") || t.Failed() {
		t.Errorf("guest output:\n%s", out)
	}
}

// TestKernelJournalDeviceFailed: the superblocks the engine writes when
// the journal device fails (journalFailed: the journal's role faulty in
// the other members, the write-back cache written out unlogged) are what
// md makes of its own journal failures. mdadm 4.2 refuses to assemble
// them without --force ("Not safe to assemble with missing or stale
// journal device"), and with --force the kernel starts the array read-only
// ("journal disk is missing, force array readonly") and reads what the
// engine's model holds, with every data member and with each one left out
// in turn (the parity the engine wrote, read back through md's
// reconstruction), in both journal modes.
func TestKernelJournalDeviceFailed(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	var disks []mdvm.Disk
	var sc strings.Builder
	want := map[int]string{}
	n := 0
	for k, wb := range []bool{false, true} {
		s, mems, m, _ := journalFailed(t, wb)
		n = s.n
		want[k] = fmt.Sprintf("%x", md5.Sum(m.b))
		var data []string
		var all []string
		for i, mem := range mems {
			b := make([]byte, mem.Geometry().Size)
			if _, err := mem.Reopen().ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, fmt.Sprintf("%d-%d.img", k, i))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			dev := "/dev/vd" + string(rune('a'+len(disks)))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
			all = append(all, dev)
			if i < s.n {
				data = append(data, dev)
			}
		}
		md := fmt.Sprintf("/dev/md%d", k)
		fmt.Fprintf(&sc, "dmesg -c >/dev/null\n")
		fmt.Fprintf(&sc, "o=$(mdadm -A %s %s 2>&1); rc=$?; echo \"%d PLAIN $(echo $o) rc=$rc\"; mdadm -S %s >/dev/null 2>&1\n", md, strings.Join(all, " "), k, md)
		fmt.Fprintf(&sc, "o=$(mdadm -A --force %s %s 2>&1); echo \"%d FORCE $(echo $o)\"\n", md, strings.Join(all, " "), k)
		fmt.Fprintf(&sc, "echo \"%d STATE $(cat /sys/block/md%d/md/array_state)\"\n", k, k)
		fmt.Fprintf(&sc, "echo \"%d LOG $(dmesg | grep -o 'journal disk is missing, force array readonly')\"\n", k)
		fmt.Fprintf(&sc, "echo \"%d MD5 $(md5sum < %s | cut -d' ' -f1)\"\nmdadm -S %s >/dev/null 2>&1\n", k, md, md)
		for skip := range data {
			var some []string
			for i, d := range data {
				if i != skip {
					some = append(some, d)
				}
			}
			fmt.Fprintf(&sc, "mdadm -A --force --run %s %s >/dev/null 2>&1 || echo ASSEMBLE-FAILED %d %d\n", md, strings.Join(some, " "), k, skip)
			fmt.Fprintf(&sc, "echo \"%d WITHOUT%d $(md5sum < %s | cut -d' ' -f1)\"\nmdadm -S %s >/dev/null 2>&1\n", k, skip, md, md)
		}
	}
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second})
	field := func(k int, key string) string {
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^%d %s ?(.*)$`, k, key)).FindStringSubmatch(string(out))
		if m == nil {
			return "<none>"
		}
		return strings.TrimSpace(m[1])
	}
	for k := range want {
		t.Logf("%d: %s; %s; %s", k, field(k, "FORCE"), field(k, "STATE"), field(k, "MD5"))
		if got := field(k, "PLAIN"); got != "mdadm: Not safe to assemble with missing or stale journal device, consider --force. rc=1" {
			t.Errorf("%d: mdadm -A without --force: %q", k, got)
		}
		if got := field(k, "FORCE"); !strings.HasPrefix(got, "mdadm: Journal is missing or stale, starting array read only.") {
			t.Errorf("%d: mdadm -A --force: %q", k, got)
		}
		if got := field(k, "STATE"); got != "readonly" {
			t.Errorf("%d: array_state %q, want readonly", k, got)
		}
		if got := field(k, "LOG"); got != "journal disk is missing, force array readonly" {
			t.Errorf("%d: the kernel's log: %q", k, got)
		}
		if got := field(k, "MD5"); got != want[k] {
			t.Errorf("%d: the kernel reads md5 %s, the engine's model holds %s", k, got, want[k])
		}
		for skip := 0; skip < n; skip++ {
			if got := field(k, fmt.Sprintf("WITHOUT%d", skip)); got != want[k] {
				t.Errorf("%d: without data member %d the kernel reads md5 %s, the engine's model holds %s", k, skip, got, want[k])
			}
		}
	}
	if strings.Contains(string(out), "FAILED") || t.Failed() {
		t.Errorf("guest output:\n%s", out)
	}
}
