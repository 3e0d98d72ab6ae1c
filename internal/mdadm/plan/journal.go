package plan

import (
	"encoding/binary"
	"fmt"
	"io"

	"mdtool/engine/r5log"
)

// journals counts the --write-journal devices.
func (p *planner) journals() int {
	n := 0
	for _, d := range p.o.Devices {
		if d.Journal {
			n++
		}
	}
	return n
}

// checkJournal is mdadm.c's check of --write-journal: raid4/5/6 only.
func (p *planner) checkJournal() error {
	if p.journals() == 0 {
		return nil
	}
	if p.level < LevelRAID4 || p.level > LevelRAID6 {
		return refuse(JournalLevel)
	}
	if p.o.Bitmap != "" && p.o.Bitmap != "none" {
		// mdadm 4.2 writes both; the md driver refuses to run a journal
		// with a bitmap (md_bitmap_create: "array has a journal").
		return refuse(JournalBitmap)
	}
	return nil
}

// journalMeta adds mdadm 4.2's write_empty_r5l_meta_block to the
// journal's writes: an empty r5l meta block with a random sequence
// number at the journal's data offset, where md reads the log from
// (journal_tail 0).
func (p *planner) journalMeta(mem *Member) error {
	var b [4]byte
	if _, err := io.ReadFull(p.rnd, b[:]); err != nil {
		return fmt.Errorf("random seq: %w", err)
	}
	seq := uint64(binary.LittleEndian.Uint32(b[:])) // random32()
	meta := r5log.EmptyMeta(r5log.Seed(p.sb.SetUUID), seq, 0)
	mem.Writes = append(mem.Writes, Write{Offset: int64(mem.Superblock.DataOffset) * 512, Data: meta})
	return nil
}
