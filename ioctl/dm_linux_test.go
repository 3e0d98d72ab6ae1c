//go:build linux

package ioctl

import (
	"encoding/binary"
	"reflect"
	"testing"
	"unsafe"
)

// cDMIoctl and cDMTargetSpec mirror include/uapi/linux/dm-ioctl.h field
// by field, so that the compiler lays them out as C does.
type cDMIoctl struct {
	Version     [3]uint32
	DataSize    uint32
	DataStart   uint32
	TargetCount uint32
	OpenCount   int32
	Flags       uint32
	EventNr     uint32
	Padding     uint32
	Dev         uint64
	Name        [128]byte
	UUID        [129]byte
	Data        [7]byte
}

type cDMTargetSpec struct {
	SectorStart uint64
	Length      uint64
	Status      int32
	Next        uint32
	TargetType  [16]byte
}

// TestDMLayout checks the hand-written offsets and sizes against the C
// layout, and the ioctl numbers against _IOWR(0xfd, cmd, struct dm_ioctl)
// as the kernel's header computes them (DM_VERSION is 0xc138fd00).
func TestDMLayout(t *testing.T) {
	var h cDMIoctl
	var s cDMTargetSpec
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof dm_ioctl", dmIoctlSize, unsafe.Sizeof(h)},
		{"data_size", dmOffDataSize, unsafe.Offsetof(h.DataSize)},
		{"data_start", dmOffDataStart, unsafe.Offsetof(h.DataStart)},
		{"target_count", dmOffTargetCount, unsafe.Offsetof(h.TargetCount)},
		{"open_count", dmOffOpenCount, unsafe.Offsetof(h.OpenCount)},
		{"flags", dmOffFlags, unsafe.Offsetof(h.Flags)},
		{"event_nr", dmOffEventNr, unsafe.Offsetof(h.EventNr)},
		{"dev", dmOffDev, unsafe.Offsetof(h.Dev)},
		{"name", dmOffName, unsafe.Offsetof(h.Name)},
		{"uuid", dmOffUUID, unsafe.Offsetof(h.UUID)},
		{"sizeof dm_target_spec", dmSpecSize, unsafe.Sizeof(s)},
		{"sector_start", dmSpecOffStart, unsafe.Offsetof(s.SectorStart)},
		{"length", dmSpecOffLength, unsafe.Offsetof(s.Length)},
		{"status", dmSpecOffStatus, unsafe.Offsetof(s.Status)},
		{"next", dmSpecOffNext, unsafe.Offsetof(s.Next)},
		{"target_type", dmSpecOffType, unsafe.Offsetof(s.TargetType)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, C layout %d", c.name, c.got, c.want)
		}
	}
	for cmd, want := range map[uint32]uint32{dmVersionCmd: 0xc138fd00, dmDevCreateCmd: 0xc138fd03,
		dmDevRemoveCmd: 0xc138fd04, dmDevSuspendCmd: 0xc138fd06, dmDevStatusCmd: 0xc138fd07,
		dmTableLoadCmd: 0xc138fd09, dmTableStatusCmd: 0xc138fd0c} {
		if got := dmRequest(cmd); got != want {
			t.Errorf("ioctl number of command %d: %#x, want %#x", cmd, got, want)
		}
	}
}

// TestDMHeaderAndTable encodes a header and a two-target table and reads
// them back through the C mirror.
func TestDMHeaderAndTable(t *testing.T) {
	table := []DMTarget{
		{Start: 0, Length: 4096 * 3, Type: "striped", Params: "3 1024 251:0 0 251:0 4096 251:0 8192"},
		{Start: 4096 * 3, Length: 8, Type: "linear", Params: "251:0 12288"},
	}
	data, err := encodeDMTable(table)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, dmIoctlSize+len(data))
	if err := dmHeader(buf, "mdtool-data", DMSuspendFlag, 2); err != nil {
		t.Fatal(err)
	}
	copy(buf[dmIoctlSize:], data)
	h := (*cDMIoctl)(unsafe.Pointer(&buf[0]))
	if h.Version != [3]uint32{4, 0, 0} || h.DataSize != uint32(len(buf)) || h.DataStart != dmIoctlSize ||
		h.TargetCount != 2 || h.Flags != DMSuspendFlag || cString(h.Name[:]) != "mdtool-data" {
		t.Fatalf("header %+v", *h)
	}
	// DM_TABLE_LOAD: next is relative to the current spec, 8-byte aligned
	off := 0
	for i, want := range table {
		s := (*cDMTargetSpec)(unsafe.Pointer(&data[off]))
		if s.SectorStart != want.Start || s.Length != want.Length || cString(s.TargetType[:]) != want.Type ||
			cString(data[off+dmSpecSize:]) != want.Params {
			t.Fatalf("target %d: %+v %q", i, *s, cString(data[off+dmSpecSize:]))
		}
		if s.Next%8 != 0 || int(s.Next) < dmSpecSize+len(want.Params)+1 {
			t.Fatalf("target %d: next %d", i, s.Next)
		}
		off += int(s.Next)
	}
	if off != len(data) {
		t.Fatalf("table is %d bytes, specs end at %d", len(data), off)
	}
	// DM_TABLE_STATUS answers with next relative to the first spec
	status := append([]byte(nil), data...)
	first := binary.NativeEndian.Uint32(status[dmSpecOffNext:])
	binary.NativeEndian.PutUint32(status[int(first)+dmSpecOffNext:], uint32(len(status)))
	got, err := decodeDMTable(status, 2)
	if err != nil || !reflect.DeepEqual(got, table) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := encodeDMTable([]DMTarget{{Type: "a-type-name-too-long"}}); err == nil {
		t.Fatal("a 20-byte target type was accepted")
	}
	if err := dmHeader(buf, string(make([]byte, 128)), 0, 0); err == nil {
		t.Fatal("a 128-byte name was accepted")
	}
}

// TestDMInfoDev decodes the kernel's huge_encode_dev of dev.
func TestDMInfoDev(t *testing.T) {
	buf := make([]byte, dmIoctlSize)
	for _, c := range []struct{ major, minor uint32 }{{253, 0}, {253, 7}, {253, 300}, {254, 1 << 19}} {
		enc := uint64(c.minor&0xff) | uint64(c.major)<<8 | uint64(c.minor&^0xff)<<12
		binary.NativeEndian.PutUint64(buf[dmOffDev:], enc)
		binary.NativeEndian.PutUint32(buf[dmOffOpenCount:], 2)
		inf := dmInfo(buf)
		if inf.Major != c.major || inf.Minor != c.minor || inf.OpenCount != 2 {
			t.Errorf("%d:%d decoded as %d:%d (open %d)", c.major, c.minor, inf.Major, inf.Minor, inf.OpenCount)
		}
	}
	if DMBlockPath(3) != "/dev/dm-3" {
		t.Fatal(DMBlockPath(3))
	}
}
