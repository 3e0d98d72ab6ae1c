package cmd

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// --update=metadata: mdadm 4.2's update_super0 "metadata" case and
// super1_make_v0 turn a clean 0.90 member without a bitmap into a v1.0
// one: a 1.0 superblock (ctime one second later, so that it is the one
// found; the array's name the preferred minor; data at sector 0; every
// slot's role from the 0.90 disk table) written at the 1.0 place, the
// 0.90 superblock left where it is; the array then starts as 1.0.

// makeV10From090 is super1_make_v0 for the member whose 0.90 superblock
// is sb0, on a device of devBytes.
func makeV10From090(sb0 *superblock.SuperblockV090, devBytes uint64) (*superblock.Superblock, error) {
	sb := &superblock.Superblock{Magic: superblock.Magic, MajorVersion: 1}
	for i, w := range []uint32{sb0.SetUUID0, sb0.SetUUID1, sb0.SetUUID2, sb0.SetUUID3} {
		binary.LittleEndian.PutUint32(sb.SetUUID[4*i:], w) // copy_uuid of the ints, in memory order
	}
	sb.SetNameString(fmt.Sprint(sb0.MDMinor))
	sb.CTime = superblock.MakeTime(int64(sb0.CTime)+1, 0)
	sb.Level = sb0.Level
	sb.Layout = sb0.Layout
	sb.Size = uint64(sb0.Size) * 2
	sb.ChunkSize = sb0.ChunkSize / 512
	sb.RaidDisks = sb0.RaidDisks
	devSectors := devBytes / 512
	if sb0.Level > 0 {
		sb.DataSize = sb.Size
	} else if devSectors >= 128 { // avail_size0: MD_NEW_SIZE_SECTORS
		sb.DataSize = devSectors&^127 - 128
	}
	sb.ResyncOffset = superblock.MaxSector
	sb.MaxDev = superblock.Disks090
	sb.DevNumber = sb0.ThisDisk.Number
	sb.UTime = superblock.MakeTime(int64(sb0.UTime), 0)
	sb.SuperOffset = (devSectors - 16) &^ 7
	if _, err := rand.Read(sb.DeviceUUID[:]); err != nil {
		return nil, err
	}
	sb.DevRoles = make([]uint16, sb.MaxDev)
	for i := range sb.DevRoles {
		d := sb0.Disks[i]
		sb.DevRoles[i] = superblock.RoleSpare
		if d.State&superblock.Disk090Sync != 0 && d.State&superblock.Disk090Faulty == 0 {
			sb.DevRoles[i] = uint16(d.RaidDisk)
		}
	}
	return sb, nil
}

// updateMetadata090 converts one member (update_super0's refusals, then
// store_super0's 1024-byte write) and loads it again as 1.0.
func (as *assembler) updateMetadata090(m *member.Member, d *asmDev, sb0 *superblock.SuperblockV090) bool {
	switch {
	case sb0.State&superblock.SB090BitmapPresent != 0:
		as.errf("Cannot update metadata when bitmap is present\n")
		return false
	case sb0.State != superblock.SB090Clean:
		as.errf("Cannot update metadata on unclean array\n")
		return false
	}
	sb, err := makeV10From090(sb0, m.Geom.Size)
	if err != nil {
		as.errf("cannot make a uuid: %v\n", err)
		return false
	}
	buf := make([]byte, 1024)
	copy(buf, sb.MarshalWithChecksum())
	if err := m.WriteAll([]member.Write{{Offset: int64(sb.SuperOffset) * 512, Data: buf}}); err != nil {
		as.errf("Could not re-write superblock on %s.\n", d.path)
		return true
	}
	if nd, _ := probeCandidate(d.path); nd != nil {
		*d = *nd
	}
	return true
}
