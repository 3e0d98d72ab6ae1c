package engine

import (
	"bytes"
	"errors"
	"testing"

	"mdtool/superblock"
)

// TestInvalidSuperLeftOut: a member whose superblock fails validation
// (here a bad checksum) is left out by Open, never written, and refused
// by a re-add; with no valid member Open fails with ErrInvalidSuper.
func TestInvalidSuperLeftOut(t *testing.T) {
	s := spec{level: "raid5", n: 4, devMiB: []int{8}, bitmap: true}
	mems := create(t, s)
	const sbOff = 4096 // metadata 1.2
	b := []byte{0}
	mems[1].ReadAt(b, sbOff+0xD8)
	b[0] ^= 0x5a
	mems[1].WriteAt(b, sbOff+0xD8)
	before := make([]byte, s.devSize(1))
	mems[1].Reopen().ReadAt(before, 0)

	a := open(t, mems, testOptions())
	for _, mi := range a.Members() {
		if mi.Device == 1 {
			t.Errorf("the invalid member is in the array: %+v", mi)
		}
	}
	if d := a.Degraded(); d != 1 {
		t.Errorf("Degraded() = %d, want 1", d)
	}
	if _, err := a.WriteAt(bytes.Repeat([]byte{7}, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	cw := &offsetWrites{Device: mems[1].Reopen(), below: 1 << 62}
	_, err := a.AddDevice(cw, AddOptions{ReAdd: true, Replacement: -1})
	if !errors.Is(err, ErrNotReAddable) || !errors.Is(err, ErrInvalidSuper) || !errors.Is(err, superblock.ErrChecksum) {
		t.Errorf("re-add: %v, want ErrNotReAddable, ErrInvalidSuper and ErrChecksum", err)
	}
	if n := cw.writes.Load(); n != 0 {
		t.Errorf("%d writes to the refused device", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	after := make([]byte, s.devSize(1))
	mems[1].Reopen().ReadAt(after, 0)
	if !bytes.Equal(before, after) {
		t.Errorf("the invalid member was written")
	}

	// No valid member at all.
	for _, i := range []int{0, 2, 3} {
		if _, err := mems[i].Reopen().WriteAt([]byte{1}, sbOff+0x0C); err != nil { // pad0
			t.Fatal(err)
		}
	}
	if a, err := Open(devices(mems), testOptions()); !errors.Is(err, ErrInvalidSuper) {
		t.Errorf("Open with no valid member: %v, want ErrInvalidSuper", err)
		if a != nil {
			a.Close()
		}
	}
}

// TestInvalidSuperDeviceRule: a superblock that parses cleanly but whose
// data does not fit the device (a rule that needs the device size) is
// left out too.
func TestInvalidSuperDeviceRule(t *testing.T) {
	s := spec{level: "raid5", n: 4, devMiB: []int{8}, bitmap: true}
	mems := create(t, s)
	const sbOff = 4096
	raw := make([]byte, superblock.AreaSize)
	mems[2].ReadAt(raw, sbOff)
	sb, err := superblock.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	sb.DataSize += 8
	mems[2].WriteAt(sb.MarshalWithChecksum(), sbOff)
	a := open(t, mems, testOptions())
	defer a.Close()
	for _, mi := range a.Members() {
		if mi.Device == 2 {
			t.Errorf("the member whose data overruns the device is in the array: %+v", mi)
		}
	}
	if d := a.Degraded(); d != 1 {
		t.Errorf("Degraded() = %d, want 1", d)
	}
}
