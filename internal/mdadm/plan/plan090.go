package plan

import (
	"crypto/sha1"
	"strconv"
	"strings"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// Minor090 is Result.Minor for 0.90 metadata.
const Minor090 = 90

// is090 is match_metadata_desc0 for the spellings that create 0.90
// superblocks: "0", "0.90", and mdadm's internal "0.91", "0.9" and
// "0.swap" (init_super0 writes minor 90 whatever the spelling), after any
// run of leading zeros ("00.90") is cut to one.
func is090(s string) bool {
	for len(s) >= 2 && s[0] == '0' && s[1] == '0' {
		s = s[1:]
	}
	switch s {
	case "0", "0.90", "0.91", "0.9", "0.swap":
		return true
	}
	return false
}

// tbmax090 is validate_geometry0's limit per device on Linux 3.1 and
// later, in sectors (4 TiB: the size field is 32 bits of KiB).
const tbmax090 = 4 * 2 << 30

// checkGeometry090 is Create()'s first validate_geometry0 call: the
// device count, a --size of 4 TiB or more, and raid0, for which mdadm
// 4.2 has always chosen a layout by then.
func (p *planner) checkGeometry090() error {
	if p.minor != Minor090 {
		return nil
	}
	switch {
	case p.raid > superblock.Disks090:
		return &Refusal{Kind: TooManyFor090, Need: superblock.Disks090}
	case p.size*2 >= tbmax090:
		return refuse(TooLargeFor090)
	case p.level == LevelRAID0:
		return refuse(RAID0LayoutOn090)
	}
	return nil
}

// checkSize090 is the last validate_geometry0 call with the smallest
// device's size (levels with a size only), then init_super0's refusal of
// --data-offset.
func (p *planner) checkSize090() error {
	if p.minor != Minor090 {
		return nil
	}
	if p.o.SizeKiB == 0 && p.level > 0 && p.minsize*2 >= tbmax090 {
		return &Refusal{Kind: DevicesTooLarge, Count: p.level}
	}
	if p.o.DataOffset != 0 {
		return refuse(DataOffsetOn090)
	}
	return nil
}

// mdMinor090 is the md_minor mdadm records: the minor of /dev/mdN (or
// /dev/md/N); mdadm gives other names the first free minor from 127 down.
func mdMinor090(mddev string) uint32 {
	for _, pre := range []string{"/dev/md/", "/dev/md"} {
		if t, ok := strings.CutPrefix(mddev, pre); ok {
			if n, err := strconv.ParseUint(t, 10, 20); err == nil {
				return uint32(n)
			}
		}
	}
	return 127
}

// addBitmap090 is add_internal_bitmap0: the bitmap 4 KiB after the
// superblock, at most 60 KiB, its chunk at least 64 MiB unless given.
func (p *planner) addBitmap090() error {
	if !p.wantBitmap {
		return nil
	}
	r := p.r
	size := p.size * 2
	if p.level == LevelRAID10 {
		near, far, _ := RAID10Copies(p.layout)
		size = p.size * uint64(p.raid) / uint64(near*far) * 2
	}
	maxBits := uint64(60*1024-bitmap.HeaderSize) * 8
	minChunk := uint64(4096)
	bits := size*512/minChunk + 1
	for bits > maxBits {
		minChunk *= 2
		bits = (bits + 1) / 2
	}
	chunk := p.o.BitmapChunk
	switch {
	case chunk == 0:
		chunk = max(minChunk, 64<<20)
	case chunk < minChunk:
		return refuse(BitmapChunkUnsupported)
	}
	p.bms = &bitmap.Header{
		Magic:       bitmap.Magic,
		Version:     bitmap.Version,
		ChunkSize:   uint32(chunk),
		DaemonSleep: bitmap.DefaultDaemonSleep,
		SyncSize:    size,
	}
	if p.o.BitmapDelay != 0 {
		p.bms.DaemonSleep = p.o.BitmapDelay
	}
	p.bms.WriteBehind = p.o.WriteBehind
	r.Bitmap, r.BitmapChunk, r.BitmapSyncSize, r.BitmapOffset = true, chunk, size, superblock.Size090>>9
	return nil
}

// base090 is init_super0: the superblock every member shares, before the
// disk table.
func (p *planner) base090() *superblock.SuperblockV090 {
	o, r := &p.o, p.r
	uuid := superblock.UUIDWords090(p.sb.SetUUID)
	if p.homehost != "" && o.UUID == nil {
		h := sha1.Sum([]byte(p.homehost))
		uuid[2], uuid[3] = superblock.HomehostWords090(h[:])
	}
	sb := superblock.New090(int32(p.level), uint32(p.size), uint32(p.raid), mdMinor090(o.MDDevice), uuid, uint32(p.sb.CTime.Seconds()))
	sb.NrDisks = uint32(p.working + p.missingDisks)
	sb.ActiveDisks = uint32(p.active)
	sb.WorkingDisks = uint32(p.working)
	sb.FailedDisks = uint32(p.missingDisks)
	sb.SpareDisks = uint32(p.spares)
	if r.ResyncOffset == superblock.MaxSector {
		sb.State = superblock.SB090Clean
	}
	if p.bms != nil {
		sb.State |= superblock.SB090BitmapPresent
	}
	sb.Layout = p.layout
	sb.ChunkSize = uint32(p.chunk * 1024)
	r.UUID = sb.UUID()
	r.Name = ""
	return sb
}

// planMembers090 is add_to_super0 for every device, then
// write_init_super0: one superblock whose this_disk is each member's own
// entry, at the 64 KiB-aligned end, and the bitmap after it (its header,
// then 0xff up to 60 KiB).
func (p *planner) planMembers090() error {
	sb := p.base090()
	for _, a := range p.order {
		d := p.o.Devices[a.dev]
		st := uint32(0)
		if a.raidDisk < p.raid {
			st = superblock.Disk090Active | superblock.Disk090Sync
		}
		if d.WriteMostly {
			st |= superblock.Disk090WriteMostly
		}
		if d.FailFast {
			st |= superblock.Disk090FailFast
		}
		sb.Disks[a.number] = superblock.Disk090{Number: uint32(a.number), Major: d.Major, Minor: d.Minor, RaidDisk: uint32(a.raidDisk), State: st}
	}
	if p.bms != nil {
		p.bms.UUID = sb.BitmapUUID090()
	}
	for _, a := range p.order {
		d := p.o.Devices[a.dev]
		m := *sb
		m.ThisDisk = sb.Disks[a.number]
		raw := m.MarshalWithChecksum()
		devBytes := d.Sectors * 512
		off := superblock.Offset090(devBytes)
		view := m.V1View(devBytes)
		if p.level >= 1 && view.DataSize < view.Size {
			return refuseDevice(SmallerThanComponent, d.Path)
		}
		mem := Member{
			Device: a.dev, Path: d.Path, DevNumber: uint32(a.number), Role: view.DevRoles[a.number],
			Superblock: view, SuperOffset: int64(off), SuperBytes: raw, V090: &m,
		}
		mem.Writes = append(mem.Writes, Write{Offset: int64(off), Data: raw})
		if p.bms != nil {
			area := make([]byte, 60<<10)
			for i := range area {
				area[i] = 0xff
			}
			copy(area, p.bms.Marshal())
			mem.BitmapOffset, mem.BitmapBytes = int64(off)+superblock.Size090, area
			mem.Writes = append(mem.Writes, Write{Offset: mem.BitmapOffset, Data: area})
		}
		p.r.Members = append(p.r.Members, mem)
	}
	return nil
}
