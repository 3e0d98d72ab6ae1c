package bitmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"mdtool/internal/mdvm"
)

var bitmapLine = regexp.MustCompile(`(?m)^ +Bitmap : (\d+) bits \(chunks\), (\d+) dirty`)

// hostExamine runs the host's `mdadm -X` on a plain file (mdadm 4.2 reads
// a non-block file as a bitmap file: header at offset 0, bits after it) and
// returns the "Bitmap :" numbers, and whether mdadm exited 0.
func hostExamine(t *testing.T, mdadm string, area []byte) (total, dirty uint64, ok bool, out string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "bitmap")
	if err := os.WriteFile(f, area, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(mdadm, "--examine-bitmap", f).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("mdadm: %v", err)
	}
	out = string(b)
	m := bitmapLine.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, err == nil, out
	}
	total, _ = strconv.ParseUint(m[1], 10, 64)
	dirty, _ = strconv.ParseUint(m[2], 10, 64)
	return total, dirty, err == nil, out
}

// TestHostExamineBitmap checks ExamineCounts and Parse's version rule
// against the host's mdadm 4.2 `-X` on bitmap files. The host mdadm is part
// of the oracle toolchain (mdvm copies it into the VM), so it is required
// wherever the VM oracle is.
func TestHostExamineBitmap(t *testing.T) {
	mdvm.Require(t)
	mdadm, err := exec.LookPath("mdadm")
	if err != nil {
		t.Fatalf("host mdadm needed by the oracle: %v", err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	random := func(h *Header, fill byte) []byte {
		a := NewArea(h, fill, 4096)
		for i := HeaderSize; i < len(a); i++ {
			a[i] = byte(r.Uint32())
		}
		return a
	}
	h := func(sync uint64, chunk uint32) *Header {
		x := goodHeader()
		x.SyncSize, x.ChunkSize = sync, chunk
		return x
	}
	type tc struct {
		name string
		h    *Header
		area []byte
	}
	var cases []tc
	add := func(name string, hd *Header, area []byte) { cases = append(cases, tc{name, hd, area}) }
	add("fresh 16 chunks", goodHeader(), NewArea(goodHeader(), 0xff, 4096))
	add("clean 16 chunks", goodHeader(), NewArea(goodHeader(), 0, 4096))
	odd := h(100003, 4096) // 12501 chunks: partial last byte
	add("random 12501 chunks", odd, random(odd, 0))
	add("truncated 12501 chunks", odd, random(odd, 0)[:HeaderSize+10])
	big := h(1<<24, 512) // 2 MiB of bits: several of mdadm's 8 KiB reads
	add("random 16M chunks", big, random(big, 0))
	add("sync size 0", h(0, 4096), NewArea(h(0, 4096), 0xff, 512))
	v3 := goodHeader()
	v3.Version = 3
	add("version 3", v3, random(v3, 0))
	for _, v := range []uint32{2, 6, 7} {
		x := goodHeader()
		x.Version = v
		add(fmt.Sprintf("version %d", v), x, NewArea(x, 0xff, 512))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			total, dirty, ok, out := hostExamine(t, mdadm, c.area)
			_, perr := Parse(c.area)
			refused := errors.Is(perr, ErrVersion) || errors.Is(perr, ErrLockless)
			if ok == refused {
				t.Fatalf("mdadm exit ok=%v but Parse error %v\n%s", ok, perr, out)
			}
			if !ok {
				return
			}
			wt, wd := ExamineCounts(c.h, c.area)
			if total != wt || dirty != wd {
				t.Fatalf("mdadm: %d bits %d dirty; ExamineCounts: %d %d\n%s", total, dirty, wt, wd, out)
			}
		})
	}
}
