package mdvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKernelHasMD(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "d0.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	out := MustExec(t, Run{Disks: []Disk{{Path: img, Mode: COW}}, Script: "cat /proc/mdstat; ls /dev/vda"})
	if !strings.Contains(string(out), "[raid6]") || !strings.Contains(string(out), "/dev/vda") {
		t.Fatalf("unexpected guest output:\n%s", out)
	}
}

// Linux 6.12 boots with `Kernel: "6.12"` (as --kernel 6.12 and
// MDVM_KERNEL=6.12), with its .ko.xz modules and their dependencies:
// ublk_drv makes /dev/ublk-control, nbd and ext4 (jbd2, mbcache, crc16)
// load, and the md driver still runs without md-linear (gone in 6.8-6.13).
func TestKernel612(t *testing.T) {
	RequireKernel(t, "6.12")
	dir := t.TempDir()
	img := filepath.Join(dir, "d0.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	out := string(MustExec(t, Run{
		Kernel:  "6.12",
		Modules: []string{"ublk_drv", "nbd", "ext4"},
		Disks:   []Disk{{Path: img, Mode: COW}},
		Script: `set -e
echo "UNAME $(uname -r)"
ls -l /dev/ublk-control
for m in ublk_drv nbd ext4 jbd2 md_mod raid456; do grep -q "^$m " /proc/modules && echo "MOD $m"; done
rmmod ublk_drv; [ ! -e /dev/ublk-control ] && echo "UBLK UNLOADED"
modprobe ublk_drv; [ -c /dev/ublk-control ] && echo "UBLK RELOADED"
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 /dev/vda missing >/dev/null 2>&1
grep -q '^md0 : active raid1' /proc/mdstat && echo "MD OK"`,
	}))
	for _, want := range []string{"UNAME 6.12.", "MOD ublk_drv", "MOD nbd", "MOD ext4", "MOD jbd2", "MOD md_mod", "MOD raid456", "UBLK UNLOADED", "UBLK RELOADED", "MD OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("guest output lacks %q:\n%s", want, out)
		}
	}
}
