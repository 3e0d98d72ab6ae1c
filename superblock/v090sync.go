package superblock

import "encoding/binary"

// New090 is the 0.90 superblock mdadm 4.2's init_super0 sets up for
// --create (md_p.h's mdp_super_t): version 0.90.0, events 1, utime =
// ctime, the disk table empty (Add090Disk fills it in).
func New090(level int32, sizeKiB uint32, raidDisks, mdMinor uint32, uuid [4]uint32, ctime uint32) *SuperblockV090 {
	return &SuperblockV090{
		Magic:        Magic,
		MinorVersion: 90,
		CTime:        ctime,
		UTime:        ctime,
		Level:        level,
		Size:         sizeKiB,
		RaidDisks:    raidDisks,
		MDMinor:      mdMinor,
		SetUUID0:     uuid[0],
		SetUUID1:     uuid[1],
		SetUUID2:     uuid[2],
		SetUUID3:     uuid[3],
		EventsLo:     1,
	}
}

// UUIDWords090 splits 16 bytes of a UUID in printed order into the four
// set_uuid words (the first 8 hex digits are set_uuid0's value, as mdadm's
// parse_uuid and uuid_from_super0 have it).
func UUIDWords090(u [16]byte) [4]uint32 {
	var w [4]uint32
	for i := range w {
		w[i] = binary.BigEndian.Uint32(u[4*i:])
	}
	return w
}

// HomehostWords090 is where init_super0 puts the homehost: the first 8
// bytes of its SHA-1 copied over set_uuid2 and set_uuid3 (host byte
// order, little-endian here).
func HomehostWords090(sha1 []byte) (uint32, uint32) {
	return binary.LittleEndian.Uint32(sha1[0:]), binary.LittleEndian.Uint32(sha1[4:])
}

// Member090 is one member as md's super_90_sync describes it in the disk
// table.
type Member090 struct {
	Major, Minor uint32
	Role         int  // raid slot, or -1 (spare)
	Faulty       bool // gets MD_DISK_FAULTY and a spare's number
	InSync       bool // MD_DISK_SYNC besides MD_DISK_ACTIVE (a recovering member has only ACTIVE)
	WriteMostly  bool
	FailFast     bool
}

// Sync090 is the kernel's super_90_sync (Linux 6.1): the superblock that
// member self of members gets, from the array's constant part in base
// (uuid, ctime, level, layout, chunk, raid_disks, md_minor) and its state:
// events, utime, the component size in KiB, whether the array is in sync
// (then recovery_cp and cp_events are recorded, and the clean bit when
// recoveryCP is MaxSector) and whether an internal bitmap is present.
// Active members take descriptor number = their slot, the others numbers
// from raid_disks up in the order given; empty slots below raid_disks are
// marked removed and faulty. The checksum is filled in.
func Sync090(base *SuperblockV090, members []Member090, self int, events uint64, utime uint32, sizeKiB uint32, inSync bool, recoveryCP uint64, bitmap bool) *SuperblockV090 {
	sb := &SuperblockV090{
		BigEndian:    base.BigEndian,
		Magic:        Magic,
		MajorVersion: base.MajorVersion,
		MinorVersion: 90,
		PatchVersion: base.PatchVersion,
		SetUUID0:     base.SetUUID0,
		SetUUID1:     base.SetUUID1,
		SetUUID2:     base.SetUUID2,
		SetUUID3:     base.SetUUID3,
		CTime:        base.CTime,
		Level:        base.Level,
		Size:         sizeKiB,
		RaidDisks:    base.RaidDisks,
		MDMinor:      base.MDMinor,
		UTime:        utime,
		Layout:       base.Layout,
		ChunkSize:    base.ChunkSize,
	}
	sb.SetEvents(events)
	if inSync {
		sb.RecoveryCP = uint32(recoveryCP)
		if recoveryCP > 0xffffffff {
			sb.RecoveryCP = 0xffffffff
		}
		sb.CPEventsHi, sb.CPEventsLo = uint32(events>>32), uint32(events)
		if recoveryCP == MaxSector {
			sb.State = SB090Clean
		}
	}
	if bitmap {
		sb.State |= SB090BitmapPresent
	}
	var active, working, failed, spare, nr uint32
	next := int(base.RaidDisks)
	sb.Disks[0].State = Disk090Removed
	selfNr := -1
	for i, m := range members {
		isActive := m.Role >= 0 && !m.Faulty
		nrI := m.Role
		if !isActive {
			nrI = next
			next++
		}
		if i == self {
			selfNr = nrI
		}
		if nrI < 0 || nrI >= Disks090 {
			continue
		}
		d := &sb.Disks[nrI]
		nr++
		d.Number, d.Major, d.Minor = uint32(nrI), m.Major, m.Minor
		d.RaidDisk = uint32(nrI)
		d.State = 0
		switch {
		case m.Faulty:
			d.State = Disk090Faulty
		case isActive:
			d.RaidDisk = uint32(m.Role)
			d.State = Disk090Active
			if m.InSync {
				d.State |= Disk090Sync
			}
			active++
			working++
		default:
			spare++
			working++
		}
		if m.WriteMostly {
			d.State |= Disk090WriteMostly
		}
		if m.FailFast {
			d.State |= Disk090FailFast
		}
	}
	for i := 0; i < int(base.RaidDisks) && i < Disks090; i++ {
		d := &sb.Disks[i]
		if d.State == 0 && d.Number == 0 {
			d.Number, d.RaidDisk = uint32(i), uint32(i)
			d.State = Disk090Removed | Disk090Faulty
			failed++
		}
	}
	sb.NrDisks, sb.ActiveDisks, sb.WorkingDisks, sb.FailedDisks, sb.SpareDisks = nr, active, working, failed, spare
	if selfNr >= 0 && selfNr < Disks090 {
		sb.ThisDisk = sb.Disks[selfNr]
	}
	sb.MarshalWithChecksum()
	return sb
}

// V1View090 describes a 0.90 member as the v1 superblock the engine works
// with, following the kernel's super_90_load and super_90_validate: the
// superblock sector at Offset090, data from sector 0 up to it (capped at
// 2^33-2 sectors for levels >= 1), the component size, the resync point
// (MaxSector when clean; recovery_cp when the checkpoint events match;
// otherwise 0), dev_number = this_disk.number and a role per descriptor
// (faulty, the slot of an in-sync one, else spare). A bitmap present is
// at 8 sectors (4 KiB after the superblock). The view is never written:
// Sync090 encodes the state back.
func (sb *SuperblockV090) V1View(devBytes uint64) *Superblock {
	sbStart := Offset090(devBytes) / 512
	dataSize := sbStart
	if sb.Level >= 1 && dataSize >= 2<<32 {
		dataSize = 2<<32 - 2
	}
	v := &Superblock{
		Magic:        Magic,
		MajorVersion: 1,
		SetUUID:      sb.UUID(),
		CTime:        MakeTime(int64(sb.CTime), 0),
		UTime:        MakeTime(int64(sb.UTime), 0),
		Level:        sb.Level,
		Layout:       sb.Layout,
		Size:         uint64(sb.Size) * 2,
		ChunkSize:    sb.ChunkSize >> 9,
		RaidDisks:    sb.RaidDisks,
		DataOffset:   0,
		DataSize:     dataSize,
		SuperOffset:  sbStart,
		DevNumber:    sb.ThisDisk.Number,
		Events:       sb.Events(),
		MaxDev:       Disks090,
	}
	switch {
	case sb.State&SB090Clean != 0:
		v.ResyncOffset = MaxSector
	case sb.EventsHi == sb.CPEventsHi && sb.EventsLo == sb.CPEventsLo:
		v.ResyncOffset = uint64(sb.RecoveryCP)
	}
	if sb.State&SB090BitmapPresent != 0 {
		v.FeatureMap |= FeatureBitmapOffset
		v.BitmapOffset = Size090 >> 9
	}
	v.DevRoles = make([]uint16, Disks090)
	for i, d := range sb.Disks {
		switch {
		case d.State&Disk090Faulty != 0:
			v.DevRoles[i] = RoleFaulty
		case d.State&Disk090Sync != 0:
			v.DevRoles[i] = uint16(d.RaidDisk)
		default:
			v.DevRoles[i] = RoleSpare
		}
	}
	if d := sb.ThisDisk; d.State&Disk090WriteMostly != 0 {
		v.DevFlags |= DevFlagWriteMostly
	}
	if sb.ThisDisk.State&Disk090FailFast != 0 {
		v.DevFlags |= DevFlagFailFast
	}
	return v
}

// BitmapUUID090 is the uuid a 0.90 array's bitmap superblock carries:
// mdadm copies the four set_uuid words as they lie in memory (host order,
// little-endian here), and compares them so.
func (sb *SuperblockV090) BitmapUUID090() [16]byte {
	var u [16]byte
	for i, w := range [4]uint32{sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3} {
		binary.LittleEndian.PutUint32(u[4*i:], w)
	}
	return u
}
