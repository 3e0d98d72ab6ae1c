package backupfile

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"
)

// mdpBackupSuper mirrors Grow.c's struct mdp_backup_super field for field
// (C and Go align these types alike on amd64).
type mdpBackupSuper struct {
	magic       [16]byte
	setUUID     [16]byte
	mtime       uint64
	devstart    uint64
	arraystart  uint64
	length      uint64
	sbCsum      uint32
	pad1        uint32
	devstart2   uint64
	arraystart2 uint64
	length2     uint64
	sbCsum2     uint32
	pad         [512 - 68 - 32]byte
}

func TestOffsets(t *testing.T) {
	var s mdpBackupSuper
	for _, c := range []struct {
		name string
		got  int
		want uintptr
	}{
		{"magic", OffMagic, unsafe.Offsetof(s.magic)},
		{"set_uuid", OffSetUUID, unsafe.Offsetof(s.setUUID)},
		{"mtime", OffMtime, unsafe.Offsetof(s.mtime)},
		{"devstart", OffDevStart, unsafe.Offsetof(s.devstart)},
		{"arraystart", OffArrayStart, unsafe.Offsetof(s.arraystart)},
		{"length", OffLength, unsafe.Offsetof(s.length)},
		{"sb_csum", OffCsum, unsafe.Offsetof(s.sbCsum)},
		{"pad1", OffPad1, unsafe.Offsetof(s.pad1)},
		{"devstart2", OffDevStart2, unsafe.Offsetof(s.devstart2)},
		{"arraystart2", OffArrayStart2, unsafe.Offsetof(s.arraystart2)},
		{"length2", OffLength2, unsafe.Offsetof(s.length2)},
		{"sb_csum2", OffCsum2, unsafe.Offsetof(s.sbCsum2)},
		{"pad", OffPad, unsafe.Offsetof(s.pad)},
	} {
		if uintptr(c.got) != c.want {
			t.Errorf("%s at %d, mdadm's struct has it at %d", c.name, c.got, c.want)
		}
	}
	// the tag lies in the pad, after every byte mdadm checks or compares
	if OffTag < OffPad || OffTag+16 > Size {
		t.Errorf("tag at %d is not in the pad [%d, %d)", OffTag, OffPad, Size)
	}
	if unsafe.Sizeof(s) != Size {
		t.Errorf("struct size %d, want %d", unsafe.Sizeof(s), Size)
	}
}

// TestChecksum: bsb_csum adds buf[0] at every step (mdadm 4.2's bug,
// which every backup file carries): the sum depends on the first byte
// and the length only.
func TestChecksum(t *testing.T) {
	a := append([]byte("m"), bytes.Repeat([]byte{0}, 63)...)
	b := append([]byte("m"), bytes.Repeat([]byte{0xff}, 63)...)
	if Checksum(a, 64) != Checksum(b, 64) {
		t.Fatal("checksum depends on bytes after the first")
	}
	// by hand: c = c<<3 + 'm' (0x6d) three times
	if got, want := Checksum(a, 3), uint32((0x6d<<3+0x6d)<<3+0x6d); got != want {
		t.Fatalf("Checksum(3) = %#x, want %#x", got, want)
	}
	// a negative first byte counts as a signed char: -1<<3 + -1
	if got, want := Checksum([]byte{0xff}, 2), uint32(0xfffffff7); got != want {
		t.Fatalf("signed: %#x, want %#x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{Version: 1, SetUUID: [16]byte{1, 2, 3}, Mtime: 1700000000, DevStart: 8, ArrayStart: 0, Length: 768},
		{Version: 2, Mtime: 5, DevStart: 8, ArrayStart: 100, Length: 10, DevStart2: 10, ArrayStart2: 300, Length2: 20},
		{Version: 2, DevStart: 8, Tag: [16]byte{'t', 'a', 'g'}},
	} {
		b := Encode(&h)
		if len(b) != Size || string(b[:16]) != map[int]string{1: Magic1, 2: Magic2}[h.Version] {
			t.Fatalf("encoded %q", b[:16])
		}
		if got := b[OffLength]; got != byte(h.Length) {
			t.Fatalf("length byte %d", got)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if *d != h {
			t.Fatalf("decoded %+v, want %+v", *d, h)
		}
		b[OffLength] ^= 1 // the checksum only covers the first byte: still valid
		if _, err := Decode(b); err != nil {
			t.Fatalf("mdadm's checksum ignores all but the first byte: %v", err)
		}
		b[OffCsum] ^= 1
		if _, err := Decode(b); !errors.Is(err, ErrChecksum) {
			t.Fatalf("bad checksum: %v", err)
		}
	}
	if _, err := Decode(make([]byte, Size)); !errors.Is(err, ErrMagic) {
		t.Fatalf("zeroes: %v", err)
	}
	if _, err := Decode(make([]byte, 10)); !errors.Is(err, ErrShort) {
		t.Fatalf("short: %v", err)
	}
}

// TestRestartRules: Grow_restart's "not needed" and new position rules.
func TestRestartRules(t *testing.T) {
	h := Header{Version: 1, ArrayStart: 0, Length: 768}
	for _, c := range []struct {
		pos  uint64
		need bool
		to   uint64
	}{{0, true, 768}, {384, true, 768}, {768, true, 768}, {769, false, 769}, {2000, false, 2000}} {
		if got := h.Needed(c.pos, true); got != c.need {
			t.Errorf("Needed(%d) = %v", c.pos, got)
		}
		if got := h.Restart(c.pos, true); got != c.to {
			t.Errorf("Restart(%d) = %d, want %d", c.pos, got, c.to)
		}
	}
	if (&Header{Version: 1}).Needed(0, true) {
		t.Error("a forgotten backup (length 0) is needed")
	}
	if !MtimeOK(1000, 1000) || !MtimeOK(1000+2*3600, 1000) || MtimeOK(1001+2*3600, 1000) ||
		!MtimeOK(1000-600, 1000) || MtimeOK(999-600, 1000) {
		t.Error("MtimeOK's window is not 2 h after, 10 min before")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(&Header{Version: 1, Length: 8, DevStart: 8}))
	f.Add(Encode(&Header{Version: 2, Length: 8, Length2: 3, DevStart2: 8}))
	f.Add([]byte("md_backup_data-1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if err != nil {
			return
		}
		e := Encode(h)
		h2, err := Decode(e)
		if err != nil || *h2 != *h {
			t.Fatalf("re-encoded header differs: %v %+v %+v", err, h2, h)
		}
		_ = h.Sections()
		_ = h.Restart(h.ArrayStart, true)
	})
}
