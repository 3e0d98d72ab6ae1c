package cmd

import (
	"encoding/binary"
	"fmt"
	"strings"

	"mdtool/engine"
	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// v1MinorOf is the minor version -e/--metadata names for a v1 superblock
// (mdadm's match_metadata_desc1), or -1 when it names none.
func v1MinorOf(metadata string) int {
	switch metadata {
	case "1", "1.2", "1.02", "default":
		return 2
	case "1.0", "1.00":
		return 0
	case "1.1", "1.01":
		return 1
	}
	return -1
}

// forcedV1Missing is what mdadm 4.2's load_super1 says about a device
// examined with -e 1.x that has no superblock where that version keeps
// it: "No super block found on DEV (Expected magic a92b4efc, got
// 00000000)" (Examine then goes on with an exit status of 0). ok is false
// when the magic is there, or when the device cannot be read (the usual
// probe reports that).
func forcedV1Missing(dev, metadata string) (msg string, ok bool) {
	if swap090Metadata(metadata) {
		return missing090Swapped(dev) // examine_swap.go
	}
	minor := v1MinorOf(metadata)
	if minor < 0 {
		return "", false
	}
	m, err := member.Open(dev, member.ReadOnly)
	if err != nil {
		return "", false
	}
	defer m.Close()
	if m.Sectors() < 24 {
		return fmt.Sprintf("%s is too small for md: size is %d sectors.", dev, m.Sectors()), true
	}
	off, err := superblock.Offset(minor, m.Sectors())
	if err != nil {
		return "", false
	}
	var b [4]byte
	if _, err := m.ReadAt(b[:], int64(off)*512); err != nil {
		return fmt.Sprintf("Cannot read superblock on %s", dev), true
	}
	if magic := binary.LittleEndian.Uint32(b[:]); magic != superblock.Magic {
		return fmt.Sprintf("No super block found on %s (Expected magic %08x, got %08x)", dev, superblock.Magic, magic), true
	}
	return "", false
}

// missingSuperWords is what select_devices says about a device without a
// usable superblock (why, from probeCandidate). Once a member was
// accepted, mdadm 4.2 loads the next devices with that member's
// superblock type: load_super1 says "No super block found on DEV
// (Expected magic a92b4efc, got ...)" and select_devices "no RAID
// superblock on DEV", where guess_super's "no recogniseable superblock"
// came before.
func missingSuperWords(first *asmDev, path, why string) []string {
	if first == nil || !strings.HasPrefix(why, "no recogniseable superblock") {
		return []string{why}
	}
	msg, ok := forcedV1Missing(path, fmt.Sprintf("1.%d", first.minor))
	if first.minor == engine.Minor090 {
		msg, ok = missing090(path)
	}
	if !ok {
		return []string{why}
	}
	return []string{msg, "no RAID superblock on " + path}
}
