package plan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"mdtool/engine/r5log"
	"mdtool/superblock"
)

// The superblocks of `mdadm -CR /dev/md0 -l5 -n4 d0 d1 d2 d3
// --write-journal d4` on 20000K devices, as mdadm 4.2 writes them (the
// kernel's -E of them is in the mdadm suite's 20raid5journal log): the
// journal keeps init_super1's event 1 and role 0xfffd, every member has
// the JOURNAL feature, the recovery spare is numbered after the journal,
// and the journal's data offset holds mdadm's empty r5l meta block.
func TestJournalCreate(t *testing.T) {
	var devs []Device
	for i := 0; i < 5; i++ {
		devs = append(devs, Device{Path: fmt.Sprintf("/dev/loop%d", i), Sectors: 40000, Journal: i == 4})
	}
	r, err := Plan(Options{MDDevice: "/dev/md0", Level: "5", RaidDevices: 4, Homehost: "mdvm",
		Now: time.Unix(1700000000, 0), Rand: rand.NewChaCha8([32]byte{9}), Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	byDev := map[int]Member{}
	for _, m := range r.Members {
		byDev[m.Device] = m
		if m.Superblock.FeatureMap != superblock.FeatureJournal {
			t.Errorf("%s: feature map 0x%x, want 0x200", m.Path, m.Superblock.FeatureMap)
		}
	}
	j := byDev[4]
	if j.DevNumber != 4 || j.Role != superblock.RoleJournal || j.Superblock.Events != 1 {
		t.Errorf("journal: number %d role 0x%x events %d, want 4, 0xfffd, 1", j.DevNumber, j.Role, j.Superblock.Events)
	}
	if d3 := byDev[3]; d3.DevNumber != 5 || d3.Role != superblock.RoleSpare || d3.Superblock.Events != 0 {
		t.Errorf("recovery spare: number %d role %d events %d, want 5, spare, 0", d3.DevNumber, d3.Role, d3.Superblock.Events)
	}
	if j.Superblock.DataOffset != 4096 || j.Superblock.DataSize != 35904 || j.Superblock.Size != 35840 {
		t.Errorf("journal: data offset %d size %d component %d, want 4096, 35904, 35840 (mdadm's -E)",
			j.Superblock.DataOffset, j.Superblock.DataSize, j.Superblock.Size)
	}
	var meta []byte
	for _, w := range j.Writes {
		if w.Offset == 4096*512 {
			meta = w.Data
		}
	}
	m, err := r5log.DecodeMeta(r5log.Seed(r.UUID), meta)
	if err != nil || m.Position != 0 || len(m.Payloads) != 0 {
		t.Errorf("journal meta block: %+v, %v; want an empty block at position 0", m, err)
	}
	for _, m := range r.Members {
		if m.Device != 4 && len(m.Writes) != 1 {
			t.Errorf("%s: %d writes, want the superblock only", m.Path, len(m.Writes))
		}
	}
}

func TestJournalRefusals(t *testing.T) {
	for _, c := range []struct {
		level, bitmap string
		want          Kind
	}{
		{"1", "", JournalLevel},
		{"10", "", JournalLevel},
		{"6", "internal", JournalBitmap},
	} {
		var devs []Device
		for i := 0; i < 5; i++ {
			devs = append(devs, Device{Path: fmt.Sprintf("/dev/loop%d", i), Sectors: 40000, Journal: i == 4})
		}
		_, err := Plan(Options{MDDevice: "/dev/md0", Level: c.level, RaidDevices: 4, Bitmap: c.bitmap, Devices: devs})
		var r *Refusal
		if !errors.As(err, &r) || r.Kind != c.want {
			t.Errorf("level %s bitmap %q: %v, want refusal %v", c.level, c.bitmap, err, c.want)
		}
	}
}

// The journal may stand anywhere in the device list (mdadm puts it where
// --write-journal stands): every device gets written once, one journal.
func TestJournalPositions(t *testing.T) {
	for _, level := range []string{"4", "5", "6"} {
		for at := 0; at < 5; at++ {
			var devs []Device
			for i := 0; i < 5; i++ {
				devs = append(devs, Device{Path: fmt.Sprintf("/dev/loop%d", i), Sectors: 40000, Journal: i == at})
			}
			r, err := Plan(Options{MDDevice: "/dev/md0", Level: level, RaidDevices: 4, Devices: devs})
			if err != nil {
				t.Fatalf("level %s journal at %d: %v", level, at, err)
			}
			seen, journals := map[int]bool{}, 0
			for _, m := range r.Members {
				if seen[m.Device] {
					t.Errorf("level %s journal at %d: %s written twice", level, at, m.Path)
				}
				seen[m.Device] = true
				if m.Role == superblock.RoleJournal {
					journals++
					if m.Device != at {
						t.Errorf("level %s: the journal role went to device %d, not %d", level, m.Device, at)
					}
				}
			}
			if len(seen) != 5 || journals != 1 {
				t.Errorf("level %s journal at %d: %d devices written, %d journals", level, at, len(seen), journals)
			}
		}
	}
}
