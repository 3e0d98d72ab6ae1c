package cmd

import (
	"encoding/binary"
	"fmt"
	"strings"

	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// mdadm 4.2 reads a 0.90 superblock of the other byte order when told to:
// "-e 0.swap" (and "-e 0.9", which match_metadata_desc0 takes the same
// way) makes load_super0 turn every superblock over after reading it
// (super0_swap_endian), and "--update=byteorder" on assemble loads the
// members so and writes them back in this host's order before the start.

// swap090Metadata tells whether -e/--metadata names mdadm's byte-swapped
// 0.90 type ("00.swap" counts too: mdadm drops a leading "0" of "00").
func swap090Metadata(metadata string) bool {
	for strings.HasPrefix(metadata, "00") {
		metadata = metadata[1:]
	}
	return metadata == "0.swap" || metadata == "0.9"
}

// loadV090Swapped is load_super0 with the byte-swap flag: the 0.90
// superblock turned over, then the usual checks (nil when they fail).
func loadV090Swapped(m *member.Member) *v090Probe {
	if m.Geom.Size < superblock.MinDevBytes090 {
		return nil
	}
	raw := make([]byte, superblock.Size090)
	if _, err := m.ReadAt(raw, int64(superblock.Offset090(m.Geom.Size))); err != nil {
		return nil
	}
	sw, _ := superblock.Swap090(raw)
	sb, err := superblock.Parse090(sw)
	return v090ProbeOf(m, sb, sw, err)
}

// probeDeviceSwapped is probeDevice for "-e 0.swap": only a byte-swapped
// 0.90 superblock counts (kind kindNone without one).
func probeDeviceSwapped(path string) (*mdProbe, error) {
	p, err := probeDevice(path)
	if err != nil || p.m == nil {
		return p, err
	}
	p.v0, p.v1, p.mbr, p.kind = nil, nil, nil, kindNone
	if v0 := loadV090Swapped(p.m); v0 != nil {
		p.v0, p.kind = v0, kindV090
	}
	return p, nil
}

// missing090Swapped is what load_super0 says, with the byte-swap flag,
// about a device without a superblock of the other byte order (the magic
// and version as they read once turned over); ok is false when it can
// say nothing.
func missing090Swapped(dev string) (msg string, ok bool) {
	m, err := member.Open(dev, member.ReadOnly)
	if err != nil {
		return "", false
	}
	defer m.Close()
	size := m.Sectors() * 512
	if size < superblock.MinDevBytes090 {
		return fmt.Sprintf("%s is too small for md: size is %d sectors.", dev, size), true
	}
	var b [8]byte
	if _, err := m.ReadAt(b[:], int64(superblock.Offset090(size))); err != nil {
		return fmt.Sprintf("Cannot read superblock on %s", dev), true
	}
	if magic := binary.BigEndian.Uint32(b[:]); magic != superblock.Magic {
		return fmt.Sprintf("No super block found on %s (Expected magic %08x, got %08x)", dev, superblock.Magic, magic), true
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != 0 {
		return fmt.Sprintf("Cannot interpret superblock on %s - version is %d", dev, v), true
	}
	return "", false
}
