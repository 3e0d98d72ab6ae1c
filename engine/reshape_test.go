package engine

import (
	"bytes"
	"testing"

	"mdtool/superblock"
)

// shiftDev moves every access at or above from by delta bytes: an array
// opened through it keeps its superblock but has its data at
// data_offset + delta.
type shiftDev struct {
	Device
	from, delta int64
}

func (d shiftDev) at(off int64) int64 {
	if off >= d.from {
		return off + d.delta
	}
	return off
}
func (d shiftDev) ReadAt(p []byte, off int64) (int, error)  { return d.Device.ReadAt(p, d.at(off)) }
func (d shiftDev) WriteAt(p []byte, off int64) (int, error) { return d.Device.WriteAt(p, d.at(off)) }

// midReshape builds the members of an array caught in a reshape from n to
// n+1 devices at array sector pos, as md leaves them: the data below pos
// in the new geometry at data_offset + shift (sectors, negative), the rest
// in the old geometry at data_offset, and superblocks with the reshape
// fields. It returns the members and the array content.
func midReshape(t *testing.T, level string, n int, pos uint64, shift int64) ([]*MemDevice, []byte) {
	t.Helper()
	old := create(t, spec{level: level, n: n, chunkKiB: 64, devMiB: []int{8}})
	nw := create(t, spec{level: level, n: n + 1, chunkKiB: 64, devMiB: []int{8}})
	sb0 := readSB(t, old[0])
	oa := open(t, old, testOptions())
	data := make([]byte, oa.Size())
	fillPattern(newRand(uint64(n)), data)
	if _, err := oa.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	oa.Close()
	from := int64(sb0.DataOffset) * 512
	var nds []Device
	for _, m := range nw {
		nds = append(nds, shiftDev{Device: m.Reopen(), from: from, delta: shift * 512})
	}
	na, err := Open(nds, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := na.WriteAt(data[:pos*512], 0); err != nil {
		t.Fatal(err)
	}
	na.Close()
	// The moved rows: new stripes below pos.
	c := uint64(128)
	k := uint64(n)
	if level == "raid6" {
		k = uint64(n - 1)
	}
	rowBytes := int64(pos / (c * k) * c * 512)
	newOff := from + shift*512
	out := make([]*MemDevice, n+1)
	for i := range out {
		if i < n {
			out[i] = old[i].Reopen()
			b := make([]byte, rowBytes)
			nw[i].Reopen().ReadAt(b, newOff)
			out[i].WriteAt(b, newOff)
		} else {
			out[i] = nw[i].Reopen()
		}
		ls, err := loadSuper(out[i], -1)
		if err != nil {
			t.Fatal(err)
		}
		sb := *sb0
		sb.DevRoles = append([]uint16(nil), sb0.DevRoles...)
		if i < n {
			o := readSB(t, old[i])
			sb.DevNumber, sb.DeviceUUID = o.DevNumber, o.DeviceUUID
		} else {
			sb.DevNumber = uint32(n)
			sb.DeviceUUID[0] ^= 0xff
		}
		sb.RaidDisks = uint32(n + 1)
		sb.FeatureMap |= superblock.FeatureReshapeActive | superblock.FeatureNewOffset
		sb.ReshapePosition, sb.DeltaDisks, sb.NewOffset = pos, 1, int32(shift)
		sb.NewLevel, sb.NewLayout, sb.NewChunk = sb.Level, sb.Layout, sb.ChunkSize
		if sb.MaxDev < uint32(n+1) {
			sb.MaxDev = uint32(n + 1)
		}
		for len(sb.DevRoles) < int(sb.MaxDev) {
			sb.DevRoles = append(sb.DevRoles, superblock.RoleSpare)
		}
		sb.DevRoles[n] = uint16(n)
		if _, err := out[i].WriteAt(sb.MarshalWithChecksum(), int64(ls.offset)*512); err != nil {
			t.Fatal(err)
		}
	}
	return out, data
}

// TestReshapeServe opens arrays caught mid-reshape (raid5 4->5, raid6
// 5->6): every sector reads through the geometry md would use; writes on
// both sides of the reshape point read back, also after a reopen; the
// superblocks keep the reshape fields as they were; sync actions wait.
func TestReshapeServe(t *testing.T) {
	for _, c := range []struct {
		level string
		n     int
		pos   uint64
	}{{"raid5", 4, 512 * 9}, {"raid6", 5, 384 * 12}} {
		t.Run(c.level, func(t *testing.T) {
			mems, data := midReshape(t, c.level, c.n, c.pos, -256)
			a := open(t, mems, testOptions())
			if ok, pos := a.Reshaping(); !ok || pos != c.pos {
				t.Fatalf("reshaping %v at %d, want %d", ok, pos, c.pos)
			}
			if a.Size() != int64(len(data)) {
				t.Fatalf("size %d, want %d (the old geometry's)", a.Size(), len(data))
			}
			m := &model{b: data}
			checkContent(t, a, m)
			if err := a.StartAction(ActionCheck); err != ErrBusy {
				t.Errorf("check during a reshape: %v, want ErrBusy", err)
			}
			// writes across the reshape point, whole stripes and parts
			r := newRand(7)
			for _, w := range []struct{ off, n int64 }{
				{int64(c.pos)*512 - 3*4096, 7 * 4096}, {0, 1 << 20}, {int64(c.pos) * 512, 1 << 20},
				{int64(len(data)) - 1<<20, 1 << 20}, {12345 * 512, 8 * 4096},
			} {
				p := make([]byte, w.n)
				fillPattern(r, p)
				mustWrite(t, a, m, p, w.off)
			}
			workload(t, a, m, 11, 200)
			checkContent(t, a, m)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			for i, d := range mems {
				sb := readSB(t, d)
				if sb.FeatureMap&(superblock.FeatureReshapeActive|superblock.FeatureNewOffset) == 0 ||
					sb.ReshapePosition != c.pos || sb.DeltaDisks != 1 || sb.NewOffset != -256 ||
					sb.RaidDisks != uint32(c.n+1) || sb.NewChunk != 128 || sb.Events < 2 {
					t.Errorf("member %d superblock after close: features %#x pos %d delta %d new_offset %d raid_disks %d events %d",
						i, sb.FeatureMap, sb.ReshapePosition, sb.DeltaDisks, sb.NewOffset, sb.RaidDisks, sb.Events)
				}
			}
			// The moved part is at the new offset: left-symmetric stripe
			// 0 has P on the last role, so array sector 0 is on role 0
			// for raid5; for raid6 Q follows P on role 0 and sector 0 is
			// on role 1.
			role := map[string]int{"raid5": 0, "raid6": 1}[c.level]
			b := make([]byte, 4096)
			sb := readSB(t, mems[role])
			mems[role].Reopen().ReadAt(b, int64(sb.NewDataOffset())*512)
			if !bytes.Equal(b, m.b[:4096]) {
				t.Errorf("array sector 0 is not at role %d's new data offset", role)
			}
			a = open(t, mems, testOptions())
			checkContent(t, a, m)
			a.Close()
		})
	}
}
