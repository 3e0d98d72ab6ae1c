package superblock

import (
	"bytes"
	"testing"
)

func TestNameCString(t *testing.T) {
	b := tv1(t)
	if got := NameCString(b); string(got) != "framework:arrayname" {
		t.Fatalf("NameCString = %q", got)
	}
	// A name filling all 32 bytes runs on into ctime (offset 0x40).
	for i := 0x20; i < 0x40; i++ {
		b[i] = 'x'
	}
	b[0x40], b[0x41], b[0x42] = 'y', 'z', 0
	if got := NameCString(b); string(got) != string(bytes.Repeat([]byte("x"), 32))+"yz" {
		t.Fatalf("run-on NameCString = %q", got)
	}
	// No NUL at all: up to the end of the buffer.
	c := bytes.Repeat([]byte("n"), 0x30)
	if got := NameCString(c); len(got) != 0x10 {
		t.Fatalf("NameCString without NUL has %d bytes, want 16", len(got))
	}
	if got := NameCString(c[:0x20]); got != nil {
		t.Fatalf("NameCString of a short buffer = %q", got)
	}
}

func TestClearFeatures(t *testing.T) {
	b := make([]byte, HeaderSize)
	le.PutUint32(b[0x08:], FeatureBitmapOffset|FeatureBadBlocks)
	le.PutUint32(b[0xD8:], 0x12345678)
	ClearFeatures(b, FeatureBitmapOffset)
	if got := le.Uint32(b[0x08:]); got != FeatureBadBlocks {
		t.Fatalf("feature_map = %#x, want %#x", got, FeatureBadBlocks)
	}
	if got := le.Uint32(b[0xD8:]); got != 0x12345678 {
		t.Fatalf("sb_csum changed to %#x", got)
	}
	sb := decode(b)
	if sb.FeatureMap != FeatureBadBlocks {
		t.Fatalf("decoded feature_map = %#x", sb.FeatureMap)
	}
	short := []byte{1, 2, 3}
	ClearFeatures(short, ^uint32(0)) // must not panic or change anything
	if !bytes.Equal(short, []byte{1, 2, 3}) {
		t.Fatalf("short buffer changed: %v", short)
	}
}

func TestDisk090Words(t *testing.T) {
	b := make([]byte, 2*Size090)
	put := func(off int, w [5]uint32) {
		for i, v := range w {
			le.PutUint32(b[off+4*i:], v)
		}
	}
	put(0x200, [5]uint32{0, 8, 16, 0, 6})          // disks[0]
	put(0x200+128*26, [5]uint32{26, 8, 32, 26, 6}) // disks[26]
	put(0xF80, [5]uint32{1, 8, 17, 1, 6})          // this_disk
	put(0x200+128*40, [5]uint32{9, 9, 9, 9, 9})    // past the superblock
	for _, c := range []struct {
		d    int
		want [5]uint32
	}{
		{-1, [5]uint32{1, 8, 17, 1, 6}},
		{0, [5]uint32{0, 8, 16, 0, 6}},
		{26, [5]uint32{26, 8, 32, 26, 6}},
		{27, [5]uint32{1, 8, 17, 1, 6}}, // 0xF80: runs on into this_disk
		{28, [5]uint32{}},               // 0x1000: the zero block after it
		{40, [5]uint32{9, 9, 9, 9, 9}},  // into the block after the superblock
		{-2, [5]uint32{}},
	} {
		if got := Disk090Words(b, c.d); got != c.want {
			t.Errorf("Disk090Words(%d) = %v, want %v", c.d, got, c.want)
		}
	}
	// Words beyond the buffer are zero.
	if got := Disk090Words(b[:0x200+128*1+8], 1); got != ([5]uint32{0, 0, 0, 0, 0}) {
		t.Errorf("Disk090Words on a cut buffer = %v", got)
	}
	if got := Disk090Words(b[:0x200+128*0+8], 0); got != ([5]uint32{0, 8, 0, 0, 0}) {
		t.Errorf("Disk090Words on a cut descriptor = %v", got)
	}
}

// Examine clears a flag in a decoded 0.90 superblock and re-encodes it in
// place of the bytes it read: Marshal must give back every byte Parse090
// read, reserved words included.
func TestMarshal090KeepsEveryByte(t *testing.T) {
	b := make([]byte, Size090)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	le.PutUint32(b[0:], Magic)
	le.PutUint32(b[4:], 0)
	sb, _ := Parse090(b)
	if sb == nil {
		t.Fatal("Parse090 gave nothing")
	}
	if got := sb.Marshal(); !bytes.Equal(got, b) {
		for i := range got {
			if got[i] != b[i] {
				t.Fatalf("Marshal differs first at byte %#x: %#x, read %#x", i, got[i], b[i])
			}
		}
	}
}
