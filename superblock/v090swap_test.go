package superblock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestSwap090: a superblock written in host (little-endian) order and
// swapped reads as the same superblock in the other order, and a second
// swap gives back the bytes; the checksum stays correct both ways.
func TestSwap090(t *testing.T) {
	sb := mk090()
	sb.ReshapePosition = 0x1122334455667788
	le := sb.MarshalWithChecksum()
	sw, err := Swap090(le)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(sw); got != Magic {
		t.Fatalf("swapped magic %08x, want %08x big-endian", got, Magic)
	}
	// the events words: hi first in the big-endian layout
	if hi, lo := binary.BigEndian.Uint32(sw[0x09C:]), binary.BigEndian.Uint32(sw[0x0A0:]); hi != 1 || lo != 0x11 {
		t.Fatalf("swapped events words %#x %#x, want 1 0x11", hi, lo)
	}
	be, perr := Parse090(sw)
	if be == nil || !be.BigEndian || !errors.Is(perr, ErrByteSwapped) || errors.Is(perr, ErrChecksum) {
		t.Fatalf("Parse090(swapped): %+v, %v", be, perr)
	}
	// mdadm swaps the events pairs only: reshape_position's halves trade places
	if be.ReshapePosition != 0x5566778811223344 {
		t.Fatalf("reshape_position %#x", be.ReshapePosition)
	}
	be.BigEndian, be.ReshapePosition = false, sb.ReshapePosition
	if *be != *sb {
		t.Fatalf("swapped superblock decodes as\n%+v\nwant\n%+v", be, sb)
	}
	back, _ := Swap090(sw)
	if !bytes.Equal(back, le) {
		t.Fatal("Swap090(Swap090(b)) != b")
	}
	if _, err := Swap090(le[:Size090-1]); err != ErrShort {
		t.Fatalf("short buffer: %v", err)
	}
}

// FuzzSwap090: swapping twice is the identity, and whatever Parse090 finds
// in b it finds in the swapped bytes in the other byte order, field for
// field (reshape_position's words aside).
func FuzzSwap090(f *testing.F) {
	for _, s := range append(syntheticSeeds(f), fixtureSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Swap090(b)
		if len(b) < Size090 {
			if err != ErrShort || s != nil {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		if back, _ := Swap090(s); !bytes.Equal(back, b[:Size090]) {
			t.Fatal("Swap090(Swap090(b)) != b")
		}
		a, aerr := Parse090(b)
		c, cerr := Parse090(s)
		if (a == nil) != (c == nil) {
			t.Fatalf("Parse090 finds a superblock on one side only: %v / %v", aerr, cerr)
		}
		if a == nil {
			return
		}
		if a.BigEndian == c.BigEndian || errors.Is(aerr, ErrChecksum) != errors.Is(cerr, ErrChecksum) {
			t.Fatalf("orders %v/%v, errors %v / %v", a.BigEndian, c.BigEndian, aerr, cerr)
		}
		rp := a.ReshapePosition
		if c.ReshapePosition != rp<<32|rp>>32 {
			t.Fatalf("reshape_position %#x, swapped %#x", rp, c.ReshapePosition)
		}
		c.BigEndian, c.ReshapePosition = a.BigEndian, rp
		if *a != *c {
			t.Fatal("the swapped superblock decodes differently")
		}
	})
}
