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
