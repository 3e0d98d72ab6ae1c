//go:build linux

package ublkexport

import (
	"context"
	"errors"
	"os"
	"testing"

	"mdtool/internal/serve/export"
	"mdtool/ioctl"
)

// ublk takes block sizes and hints as shifts: a power of two passes
// unchanged, a 3-chunk full stripe becomes its largest power-of-two
// divisor (the chunk).
func TestParams(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{{0, 0}, {512, 512}, {524288, 524288}, {1572864, 524288}, {3 << 20, 1 << 20}, {6144, 2048}} {
		if got := Hint(c.in); got != c.want {
			t.Errorf("Hint(%d) = %d, want %d", c.in, got, c.want)
		}
	}
	b, err := export.NewMem(1<<30, 512, 3<<19, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Options{IOMin: 524288, IOOpt: 1572864, Boundary: 1572864, Discard: true, ID: -1}.withDefaults(b)
	if err != nil {
		t.Fatal(err)
	}
	// a full stripe above 1 MiB fits in one request
	if o.MaxIO != 3<<19 || o.Depth != 64 || o.Queues < 1 || o.PhysicalBlock != 512 {
		t.Errorf("defaults %+v", o)
	}
	p := params(b, o)
	want := ioctl.UblkParamBasic{Attrs: ioctl.UblkAttrVolatileCache | ioctl.UblkAttrFUA, LogicalBSShift: 9, PhysicalBSShift: 9,
		IOMinShift: 19, IOOptShift: 19, MaxSectors: 3072, ChunkSectors: 3072, DevSectors: 1 << 21}
	if p.Basic != want {
		t.Errorf("basic %+v\nwant  %+v", p.Basic, want)
	}
	if p.Types != ioctl.UblkParamTypeBasic|ioctl.UblkParamTypeDiscard || p.Discard.DiscardGranularity != 524288 ||
		p.Discard.MaxDiscardSegments != 1 || p.Discard.MaxWriteZeroesSectors != 3072 {
		t.Errorf("discard %+v types %#x", p.Discard, p.Types)
	}
	o.NoWriteCache, o.Discard = true, false
	if p := params(b, o); p.Basic.Attrs != 0 || p.Types != ioctl.UblkParamTypeBasic {
		t.Errorf("without cache or discard: attrs %#x types %#x", p.Basic.Attrs, p.Types)
	}
	plain, _ := export.NewMem(1<<20, 512, 4096, 4<<20)
	if o, _ := (Options{}).withDefaults(plain); o.MaxIO != 1<<20 {
		t.Errorf("default largest request %d, want 1 MiB", o.MaxIO)
	}
	small, _ := export.NewMem(1<<20, 8192, 8192, 1<<20)
	if _, err := (Options{}).withDefaults(small); err == nil && os.Getpagesize() < 8192 {
		t.Errorf("a logical block above the page size was accepted")
	}
}

// Without the ublk driver (no /dev/ublk-control, as on CI hosts) Attach
// and Recover say so.
func TestNoDriver(t *testing.T) {
	if _, err := os.Stat(ioctl.UblkControlPath); err == nil {
		t.Skip("this host has the ublk driver; the VM tests cover it")
	}
	b, _ := export.NewMem(1<<20, 512, 4096, 1<<20)
	if _, err := Attach(context.Background(), b, Options{ID: -1}); !errors.Is(err, ErrNoUblk) {
		t.Errorf("Attach: %v", err)
	}
	if _, err := Recover(context.Background(), 0, b, Options{}); !errors.Is(err, ErrNoUblk) {
		t.Errorf("Recover: %v", err)
	}
}

// Available without loading says whether the control device is there.
func TestAvailable(t *testing.T) {
	_, statErr := os.Stat(ioctl.UblkControlPath)
	err := Available(false)
	if (statErr == nil) != (err == nil) {
		t.Fatalf("Available(false) = %v with the control device stat %v", err, statErr)
	}
	if err != nil && !errors.Is(err, ErrNoUblk) {
		t.Fatalf("Available(false) = %v, want ErrNoUblk", err)
	}
}
