package probe

import (
	"encoding/binary"
	"io"

	"mdtool/superblock"
)

// CreateFindingKind is one of the checks mdadm 4.2's Create runs on every
// member before it asks "Continue creating array?" (util.c check_ext2,
// check_reiser, check_raid and check_partitions).
type CreateFindingKind int

// The findings, in the order mdadm reports them for one device.
const (
	// FoundExt2: an ext2/3/4 superblock (magic 0xEF53 at byte 1080);
	// SizeKiB is the block count times the block size in KiB, Time the
	// last mount time.
	FoundExt2 CreateFindingKind = iota + 1
	// FoundReiser: a reiserfs superblock at 64 KiB; SizeKiB its size.
	FoundReiser
	// FoundRAID: an md superblock (guess_super: 0.90 or 1.x, the newest
	// ctime); Level, RaidDisks and Time (ctime) from it.
	FoundRAID
	// FoundPartitionTable: guess_super found a partition table (a boot
	// sector signature 0x55AA at byte 510) and no md superblock.
	FoundPartitionTable
	// FoundPartitionsLost: check_partitions for metadata 1.1/1.2: a
	// partition table would be lost or meaningless under the new array.
	FoundPartitionsLost
)

// CreateFinding is one thing mdadm 4.2's create warns about on a member.
type CreateFinding struct {
	Kind      CreateFindingKind
	SizeKiB   uint64
	Time      int64 // seconds since the epoch (mtime or ctime)
	Level     int32
	RaidDisks int
}

// CreateChecks runs mdadm 4.2's create-time checks on a device of size
// bytes: check_ext2, check_reiser, check_raid and (for metadata minor
// 1 or 2) check_partitions, in that order. Unlike Probe it reports only
// what mdadm reports, with the values mdadm prints. Only a read error
// (ErrRead) is an error.
func CreateChecks(r io.ReaderAt, size int64, minor int) ([]CreateFinding, error) {
	rd := &reader{r: r, size: size}
	var out []CreateFinding
	le := binary.LittleEndian
	if b := rd.at(1024, 1024); b != nil && b[56] == 0x53 && b[57] == 0xef {
		blocks := uint64(le.Uint32(b[4:]))
		out = append(out, CreateFinding{Kind: FoundExt2, SizeKiB: blocks << (le.Uint32(b[24:]) & 63), Time: int64(le.Uint32(b[44:]))})
	}
	if b := rd.at(64*1024, 1024); b != nil && (string(b[52:60]) == "ReIsErFs" || string(b[52:61]) == "ReIsEr2Fs") {
		out = append(out, CreateFinding{Kind: FoundReiser, SizeKiB: uint64(le.Uint32(b[0:])) * 4})
	}
	if f, ok := guessRAID(rd); ok {
		out = append(out, f)
	} else if mbrMagic(rd) {
		out = append(out, CreateFinding{Kind: FoundPartitionTable})
	}
	if minor >= 1 && partitionTable(rd) {
		out = append(out, CreateFinding{Kind: FoundPartitionsLost})
	}
	return out, rd.err
}

// guessRAID is guess_super for the md formats: of a 0.90 and a 1.x
// superblock, the one with the newer ctime (0.90 first on a tie).
func guessRAID(rd *reader) (CreateFinding, bool) {
	var best CreateFinding
	found := false
	if off := int64(superblock.Offset090(uint64(rd.size))); off != 0 {
		if b := rd.at(off, superblock.Size090); b != nil {
			if sb, _ := superblock.Parse090(b); sb != nil && sb.MajorVersion == 0 {
				best = CreateFinding{Kind: FoundRAID, Level: sb.Level, RaidDisks: int(sb.RaidDisks), Time: int64(sb.CTime)}
				found = true
			}
		}
	}
	if f, err := superblock.FindV1(rd.r, uint64(rd.size)/512, -1); err == nil {
		t := f.SB.CTime.Seconds()
		if !found || t > best.Time {
			best = CreateFinding{Kind: FoundRAID, Level: int32(f.SB.Level), RaidDisks: int(f.SB.RaidDisks), Time: t}
			found = true
		}
	}
	return best, found
}

// mbrMagic is mdadm's super-mbr load_super: the boot sector signature.
func mbrMagic(rd *reader) bool {
	b := rd.at(0, 512)
	return b != nil && b[510] == 0x55 && b[511] == 0xaa
}

// partitionTable is get_last_partition_end's answer "a partition table is
// here": an MBR signature, and when it holds a GPT protective entry, a
// GPT header ("EFI PART") in the next sector.
func partitionTable(rd *reader) bool {
	if !mbrMagic(rd) {
		return false
	}
	b := rd.at(0, 512)
	for p := 0; p < 4; p++ {
		if b[446+16*p+4] == 0xee {
			h := rd.at(512, 512)
			return h != nil && string(h[:8]) == "EFI PART"
		}
	}
	return true
}
