package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	mdmember "mdtool/internal/mdadm/member"
)

// TestFindV1MatchesMember: the array's own superblock finder (findV1) and
// internal/mdadm/member.FindV1, which the array may not import, find the
// same superblock (or none) on fresh, checksum-damaged and empty members,
// for every metadata minor asked for.
func TestFindV1MatchesMember(t *testing.T) {
	for _, md := range []string{"1.0", "1.1", "1.2"} {
		for _, damage := range []bool{false, true} {
			mems := create(t, spec{level: "raid1", n: 2, metadata: md})
			d := mems[0]
			if damage {
				ls, err := findV1(deviceReader{d}, uint64(d.Geometry().Size)>>9, -1)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 1)
				off := int64(ls.offset)*512 + 40 // inside set_name
				d.ReadAt(b, off)
				b[0] ^= 0x55
				d.WriteAt(b, off)
			}
			compareFindV1(t, fmt.Sprintf("v%s damaged=%v", md, damage), d)
		}
	}
	compareFindV1(t, "empty", NewMemDevice(8<<20))
}

func compareFindV1(t *testing.T, name string, d Device) {
	t.Helper()
	sectors := uint64(d.Geometry().Size) >> 9
	found := 0
	for minor := -1; minor <= 2; minor++ {
		got, gerr := findV1(deviceReader{d}, sectors, minor)
		want, werr := mdmember.FindV1(deviceReader{d}, sectors, minor)
		if errors.Is(werr, mdmember.ErrNoSuperblock) {
			if !errors.Is(gerr, ErrNoSuperblock) {
				t.Errorf("%s minor %d: findV1 = %v, %v; member.FindV1 found none", name, minor, got, gerr)
			}
			continue
		}
		if werr != nil || gerr != nil {
			t.Fatalf("%s minor %d: findV1 err %v, member.FindV1 err %v", name, minor, gerr, werr)
		}
		found++
		if damaged := strings.Contains(name, "damaged=true"); damaged != (got.err != nil) {
			t.Errorf("%s minor %d: findV1 parse error %v", name, minor, got.err)
		}
		if got.minor != want.Minor || got.offset != want.Offset || !bytes.Equal(got.raw, want.Raw) ||
			(got.err == nil) != (want.Err == nil) || got.sb.CTime != want.SB.CTime {
			t.Errorf("%s minor %d: findV1 = minor %d offset %d err %v; member.FindV1 = minor %d offset %d err %v",
				name, minor, got.minor, got.offset, got.err, want.Minor, want.Offset, want.Err)
		}
	}
	if name != "empty" && found != 2 { // minor -1 and the array's own minor
		t.Errorf("%s: found a superblock %d times, want 2", name, found)
	}
}
