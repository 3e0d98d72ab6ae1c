// Package probe finds what is already on a device before `create` writes
// to it: md superblocks of any version at any of their locations,
// filesystems, swap, encrypted and volume-manager headers, and partition
// tables. These are the things for which mdadm (and wipefs) warn, and for
// which mdtool refuses to create without --force/--run.
//
// Detection follows the on-disk magics libblkid uses (and, for md, the
// kernel's and mdadm's own location rules); it only reads.
package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"mdtool/superblock"
)

// Kind groups signatures.
type Kind string

const (
	KindRAID           Kind = "raid"
	KindFilesystem     Kind = "filesystem"
	KindSwap           Kind = "swap"
	KindCrypto         Kind = "crypto"
	KindVolume         Kind = "volume"
	KindPartitionTable Kind = "partition table"
)

// Signature is one thing found on the device.
type Signature struct {
	Kind Kind
	// Type is the libblkid TYPE/PTTYPE name: "linux_raid_member", "ext4",
	// "xfs", "btrfs", "swap", "vfat", "ntfs", "exfat", "crypto_LUKS",
	// "LVM2_member", "iso9660", "bcache", "zfs_member", "reiserfs",
	// "jbd", and the partition tables "dos", "PMBR" (a GPT's protective
	// MBR), "gpt".
	Type string
	// Offset is the byte offset of the magic; Magic its bytes (what
	// wipefs would erase).
	Offset int64
	Magic  []byte
	// Version: md metadata version ("1.2", "0.90"), LUKS version, ...
	Version string
	// UUID in the form the tool that made it prints (mdadm's
	// 8:8:8:8 form for md), Label the filesystem label or md name.
	UUID  string
	Label string
	// Description is a short text such as "ext4 filesystem (label
	// \"data\")", "partition table (gpt)" or "md superblock v1.2 (array
	// 0123abcd:..., name \"mdvm:0\", raid5, 4 devices)".
	Description string
	// Note is set for damaged metadata (e.g. "bad checksum").
	Note string
}

// ErrRead is wrapped by Probe's error when the device cannot be read
// (anything but io.EOF). Small devices are not an error: they just have
// fewer places to look.
var ErrRead = errors.New("probe: read error")

// reader reads whole ranges inside [0, size), treating ranges past the end
// as absent.
type reader struct {
	r    io.ReaderAt
	size int64
	err  error
}

func (rd *reader) at(off int64, n int) []byte {
	if rd.err != nil || off < 0 || n <= 0 || off+int64(n) > rd.size {
		return nil
	}
	b := make([]byte, n)
	m, err := rd.r.ReadAt(b, off)
	if m == n {
		return b
	}
	if err != nil && !errors.Is(err, io.EOF) {
		rd.err = fmt.Errorf("%w at offset %d: %v", ErrRead, off, err)
	}
	return nil
}

// Probe looks for signatures on a device of size bytes. Results are sorted
// by offset. Only a read error is an error; unrecognised content is
// simply not reported.
func Probe(r io.ReaderAt, size int64) ([]Signature, error) {
	rd := &reader{r: r, size: size}
	var out []Signature
	for _, p := range probers {
		out = append(out, p(rd)...)
		if rd.err != nil {
			return nil, rd.err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out, nil
}

var probers = []func(*reader) []Signature{
	probeMD1,
	probeMD090,
	probeExt,
	probeXFS,
	probeBtrfs,
	probeSwap,
	probeBootSector, // vfat, ntfs, exfat, dos partition table
	probeGPT,
	probeLUKS,
	probeLVM2,
	probeISO9660,
	probeBcache,
	probeReiser,
	probeZFS,
}

var le = binary.LittleEndian

// cstr returns b up to the first NUL, trimmed of trailing spaces.
func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimRight(string(b), " ")
}

func dashedUUID(u []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func withLabel(desc, label string) string {
	if label == "" {
		return desc
	}
	return fmt.Sprintf("%s (label %q)", desc, label)
}

// ---- md ----

func probeMD1(rd *reader) []Signature {
	var out []Signature
	sectors := uint64(rd.size) / 512
	for _, minor := range []int{0, 1, 2} {
		sect, err := superblock.Offset(minor, sectors)
		if err != nil {
			continue
		}
		off := int64(sect) * 512
		b := rd.at(off, superblock.AreaSize)
		if b == nil {
			continue
		}
		if le.Uint32(b) != superblock.Magic || le.Uint32(b[4:]) != 1 {
			continue
		}
		sb, err := superblock.Parse(b)
		if sb == nil {
			continue
		}
		// Like libblkid, a copy whose super_offset points elsewhere is
		// not a superblock of this minor version.
		if sb.SuperOffset != sect {
			continue
		}
		s := Signature{
			Kind:    KindRAID,
			Type:    "linux_raid_member",
			Offset:  off,
			Magic:   append([]byte(nil), b[:4]...),
			Version: fmt.Sprintf("1.%d", minor),
			UUID:    superblock.FormatUUID(sb.SetUUID),
			Label:   sb.Name(),
		}
		if err != nil {
			s.Note = noteFor(err)
		}
		s.Description = mdDescription(s.Version, s.UUID, s.Label, int(sb.Level), int(sb.RaidDisks), s.Note)
		out = append(out, s)
	}
	return out
}

func noteFor(err error) string {
	switch {
	case errors.Is(err, superblock.ErrChecksum):
		return "bad checksum"
	default:
		return "damaged: " + err.Error()
	}
}

var levelNames = map[int]string{-1: "linear", 0: "raid0", 1: "raid1", 4: "raid4", 5: "raid5", 6: "raid6", 10: "raid10", -4: "multipath", -5: "faulty"}

func mdDescription(version, uuid, name string, level, disks int, note string) string {
	var parts []string
	parts = append(parts, "array "+uuid)
	if name != "" {
		parts = append(parts, fmt.Sprintf("name %q", name))
	}
	if l, ok := levelNames[level]; ok {
		parts = append(parts, l)
	} else {
		parts = append(parts, fmt.Sprintf("level %d", level))
	}
	parts = append(parts, fmt.Sprintf("%d devices", disks))
	if note != "" {
		parts = append(parts, note)
	}
	return fmt.Sprintf("md superblock v%s (%s)", version, strings.Join(parts, ", "))
}

func probeMD090(rd *reader) []Signature {
	off := int64(superblock.Offset090(uint64(rd.size)))
	if off == 0 {
		return nil
	}
	b := rd.at(off, superblock.Size090)
	if b == nil {
		return nil
	}
	sb, err := superblock.Parse090(b)
	if sb == nil || sb.MajorVersion != 0 {
		return nil
	}
	s := Signature{
		Kind:    KindRAID,
		Type:    "linux_raid_member",
		Offset:  off,
		Magic:   append([]byte(nil), b[:4]...),
		Version: "0.90",
		UUID:    superblock.FormatUUID(sb.UUID()),
	}
	if err != nil {
		s.Note = noteFor(err)
	}
	s.Description = mdDescription(s.Version, s.UUID, "", int(sb.Level), int(sb.RaidDisks), s.Note)
	return []Signature{s}
}

// ---- filesystems ----

func probeExt(rd *reader) []Signature {
	b := rd.at(1024, 1024)
	if b == nil || le.Uint16(b[56:]) != 0xef53 {
		return nil
	}
	compat, incompat, roCompat := le.Uint32(b[92:]), le.Uint32(b[96:]), le.Uint32(b[100:])
	typ := "ext2"
	const (
		compatJournal     = 0x4
		incompatJournalDv = 0x8
	)
	switch {
	case incompat&incompatJournalDv != 0:
		typ = "jbd"
	case incompat&^0x0016 != 0 || roCompat&^0x0007 != 0:
		// anything beyond ext3's feature set (extents, 64bit, flex_bg,
		// huge_file, metadata_csum, ...)
		typ = "ext4"
	case compat&compatJournal != 0:
		typ = "ext3"
	}
	label := cstr(b[120:136])
	s := Signature{
		Kind:   KindFilesystem,
		Type:   typ,
		Offset: 1080,
		Magic:  []byte{0x53, 0xef},
		UUID:   dashedUUID(b[104:120]),
		Label:  label,
	}
	if typ == "jbd" {
		s.Description = "ext3/ext4 external journal"
	} else {
		s.Description = withLabel(typ+" filesystem", label)
	}
	return []Signature{s}
}

func probeXFS(rd *reader) []Signature {
	b := rd.at(0, 512)
	if b == nil || string(b[:4]) != "XFSB" {
		return nil
	}
	label := cstr(b[108:120])
	return []Signature{{
		Kind: KindFilesystem, Type: "xfs", Offset: 0, Magic: []byte("XFSB"),
		UUID: dashedUUID(b[32:48]), Label: label,
		Description: withLabel("xfs filesystem", label),
	}}
}

func probeBtrfs(rd *reader) []Signature {
	b := rd.at(65536, 4096)
	if b == nil || string(b[64:72]) != "_BHRfS_M" {
		return nil
	}
	label := cstr(b[299:555])
	return []Signature{{
		Kind: KindFilesystem, Type: "btrfs", Offset: 65536 + 64, Magic: []byte("_BHRfS_M"),
		UUID: dashedUUID(b[32:48]), Label: label,
		Description: withLabel("btrfs filesystem", label),
	}}
}

func probeSwap(rd *reader) []Signature {
	for _, page := range []int64{4096, 8192, 16384, 65536} {
		b := rd.at(page-10, 10)
		if b == nil {
			continue
		}
		switch string(b) {
		case "SWAPSPACE2":
			h := rd.at(1024, 44)
			s := Signature{Kind: KindSwap, Type: "swap", Offset: page - 10, Magic: b, Version: "1"}
			if h != nil {
				s.UUID = dashedUUID(h[12:28])
				s.Label = cstr(h[28:44])
			}
			s.Description = withLabel("swap space", s.Label)
			return []Signature{s}
		case "SWAP-SPACE":
			return []Signature{{Kind: KindSwap, Type: "swap", Offset: page - 10, Magic: b, Version: "0", Description: "swap space (old format)"}}
		}
	}
	return nil
}

func probeBootSector(rd *reader) []Signature {
	b := rd.at(0, 512)
	if b == nil {
		return nil
	}
	sig := b[510] == 0x55 && b[511] == 0xaa
	switch {
	case string(b[3:11]) == "NTFS    ":
		return []Signature{{Kind: KindFilesystem, Type: "ntfs", Offset: 3, Magic: []byte("NTFS    "),
			UUID: fmt.Sprintf("%016X", le.Uint64(b[72:])), Description: "ntfs filesystem"}}
	case string(b[3:11]) == "EXFAT   ":
		return []Signature{{Kind: KindFilesystem, Type: "exfat", Offset: 3, Magic: []byte("EXFAT   "),
			UUID: fmt.Sprintf("%04X-%04X", le.Uint16(b[102:]), le.Uint16(b[100:])), Description: "exfat filesystem"}}
	case (b[0] == 0xeb || b[0] == 0xe9) && sig && (string(b[82:87]) == "FAT32" || string(b[54:59]) == "FAT12" || string(b[54:59]) == "FAT16" || string(b[54:57]) == "FAT"):
		off, labelOff, idOff, ver := int64(54), 43, 39, "FAT16"
		if string(b[82:87]) == "FAT32" {
			off, labelOff, idOff, ver = 82, 71, 67, "FAT32"
		} else if string(b[54:59]) == "FAT12" {
			ver = "FAT12"
		}
		label := cstr(b[labelOff : labelOff+11])
		if label == "NO NAME" {
			label = ""
		}
		id := le.Uint32(b[idOff:])
		return []Signature{{Kind: KindFilesystem, Type: "vfat", Offset: off, Magic: append([]byte(nil), b[off:off+8]...),
			Version: ver, UUID: fmt.Sprintf("%04X-%04X", id>>16, id&0xffff), Label: label,
			Description: withLabel("vfat filesystem ("+ver+")", label)}}
	case sig:
		// An MBR counts when it has a partition entry.
		used := 0
		for i := 0; i < 4; i++ {
			e := b[446+16*i:]
			if e[4] != 0 && (e[0] == 0 || e[0] == 0x80) {
				used++
			}
		}
		if used == 0 {
			return nil
		}
		typ, desc := "dos", "partition table (dos)"
		if b[446+4] == 0xee {
			typ, desc = "PMBR", "protective MBR (gpt)"
		}
		return []Signature{{Kind: KindPartitionTable, Type: typ, Offset: 510, Magic: []byte{0x55, 0xaa},
			UUID: fmt.Sprintf("%08x", le.Uint32(b[440:])), Description: desc}}
	}
	return nil
}

func probeGPT(rd *reader) []Signature {
	var out []Signature
	for _, off := range []int64{512, 4096} {
		b := rd.at(off, 92)
		if b == nil || string(b[:8]) != "EFI PART" {
			continue
		}
		// The header's own LBA tells 512 from 4096-byte sectors.
		if lba := le.Uint64(b[24:]); lba != 1 {
			continue
		}
		g := b[56:72]
		u := []byte{g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]}
		desc := "partition table (gpt)"
		if off == 4096 {
			desc = "partition table (gpt, 4096-byte sectors)"
		}
		out = append(out, Signature{Kind: KindPartitionTable, Type: "gpt", Offset: off, Magic: []byte("EFI PART"),
			UUID: dashedUUID(u), Description: desc})
	}
	return out
}

func probeLUKS(rd *reader) []Signature {
	b := rd.at(0, 512)
	if b == nil || string(b[:6]) != "LUKS\xba\xbe" {
		return nil
	}
	ver := binary.BigEndian.Uint16(b[6:])
	s := Signature{Kind: KindCrypto, Type: "crypto_LUKS", Offset: 0, Magic: append([]byte(nil), b[:6]...),
		Version: fmt.Sprint(ver), UUID: cstr(b[168:208])}
	if ver == 2 {
		s.Label = cstr(b[24:72])
	}
	s.Description = withLabel(fmt.Sprintf("LUKS%d encrypted volume", ver), s.Label)
	return []Signature{s}
}

func probeLVM2(rd *reader) []Signature {
	for i := int64(0); i < 4; i++ {
		b := rd.at(i*512, 512)
		if b == nil || string(b[:8]) != "LABELONE" || string(b[24:32]) != "LVM2 001" {
			continue
		}
		if le.Uint64(b[8:]) != uint64(i) {
			continue
		}
		id := string(b[32:64])
		return []Signature{{Kind: KindVolume, Type: "LVM2_member", Offset: i*512 + 24, Magic: []byte("LVM2 001"),
			UUID: lvmUUID(id), Description: "LVM2 physical volume"}}
	}
	return nil
}

// lvmUUID formats the 32-character PV id as LVM does (6-4-4-4-4-4-6).
func lvmUUID(id string) string {
	if len(id) != 32 {
		return id
	}
	return strings.Join([]string{id[0:6], id[6:10], id[10:14], id[14:18], id[18:22], id[22:26], id[26:32]}, "-")
}

func probeISO9660(rd *reader) []Signature {
	b := rd.at(32768, 2048)
	if b == nil || string(b[1:6]) != "CD001" {
		return nil
	}
	label := cstr(bytes.TrimRight(b[40:72], " "))
	return []Signature{{Kind: KindFilesystem, Type: "iso9660", Offset: 32769, Magic: []byte("CD001"), Label: label,
		Description: withLabel("iso9660 filesystem", label)}}
}

var bcacheMagic = []byte{0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81}

func probeBcache(rd *reader) []Signature {
	b := rd.at(4096, 208)
	if b == nil || !bytes.Equal(b[24:40], bcacheMagic) {
		return nil
	}
	return []Signature{{Kind: KindVolume, Type: "bcache", Offset: 4096 + 24, Magic: append([]byte(nil), bcacheMagic...),
		UUID: dashedUUID(b[40:56]), Description: "bcache device"}}
}

func probeReiser(rd *reader) []Signature {
	for _, base := range []int64{65536, 8192} {
		b := rd.at(base, 128)
		if b == nil {
			continue
		}
		m := string(b[52:62])
		if strings.HasPrefix(m, "ReIsErFs") || strings.HasPrefix(m, "ReIsEr2Fs") || strings.HasPrefix(m, "ReIsEr3Fs") {
			return []Signature{{Kind: KindFilesystem, Type: "reiserfs", Offset: base + 52, Magic: []byte(strings.TrimRight(m, "\x00")),
				Description: "reiserfs filesystem"}}
		}
	}
	return nil
}

// ZFS: each 256 KiB vdev label (two at the start, two at the end of the
// device) holds an uberblock array from 128 KiB on, 1 KiB slots, each
// starting with the magic 0x00bab10c in the pool's byte order.
func probeZFS(rd *reader) []Signature {
	const label = 256 << 10
	for _, lo := range []int64{0, label, rd.size&^(label-1) - 2*label, rd.size&^(label-1) - label} {
		if lo < 0 {
			continue
		}
		found := 0
		first := int64(-1)
		var magic []byte
		for slot := int64(0); slot < 128; slot++ {
			off := lo + 128<<10 + slot*1024
			b := rd.at(off, 8)
			if b == nil {
				break
			}
			if le.Uint64(b) == 0x00bab10c || binary.BigEndian.Uint64(b) == 0x00bab10c {
				found++
				if first < 0 {
					first, magic = off, b
				}
			}
		}
		if found >= 4 {
			return []Signature{{Kind: KindVolume, Type: "zfs_member", Offset: first,
				Magic: magic, Description: "ZFS pool member"}}
		}
	}
	return nil
}
