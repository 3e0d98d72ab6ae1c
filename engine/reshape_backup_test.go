package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"mdtool/engine/backupfile"
	"mdtool/superblock"
)

// memBackup is a backup file in memory.
type memBackup struct {
	mu sync.Mutex
	b  []byte
}

func (f *memBackup) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off+int64(len(p)) > int64(len(f.b)) {
		return 0, errors.New("short backup file")
	}
	return copy(p, f.b[off:]), nil
}

func (f *memBackup) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.b)) {
		f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
	}
	return copy(f.b[off:], p), nil
}

func (f *memBackup) Sync() error { return nil }

func (f *memBackup) clone() *memBackup {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &memBackup{b: append([]byte(nil), f.b...)}
}

func cloneMem(t *testing.T, d *MemDevice) *MemDevice {
	t.Helper()
	n := d.Geometry().Size
	b := make([]byte, n)
	if _, err := d.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	c := NewMemDevice(n)
	if _, err := c.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCriticalEnd(t *testing.T) {
	// Grow_restart's last_block, by hand: 64K chunks, 2 -> 3 data disks:
	// new stripe 128 ends at 384 (old 192 -> 128: overlaps), 256 at 768
	// (old 384): clear.
	if got := criticalEnd(128, 128, 2, 3); got != 768 {
		t.Fatalf("criticalEnd 2->3 = %d, want 768", got)
	}
	if got := criticalEnd(128, 128, 3, 4); got != 1536 {
		t.Fatalf("criticalEnd 3->4 = %d, want 1536", got)
	}
}

// TestReshapeInPlace: a growth with a backup file keeps data_offset
// (no new_offset), backs the critical section up in mdadm's format
// before overwriting it, records reshape_position past it and forgets
// the backup. A crash inside the critical section (the superblocks still
// at 0, the moved stripes torn) is refused without the backup file and
// restored with it (reshape_position then at the backup's end), and the
// reshape then finishes with the data intact.
func TestReshapeInPlace(t *testing.T) {
	for _, c := range []struct {
		level string
		n     int
	}{{"raid5", 3}, {"raid6", 4}} {
		t.Run(c.level, func(t *testing.T) {
			mems := create(t, spec{level: c.level, n: c.n, chunkKiB: 64, devMiB: []int{8}})
			a := open(t, mems, recoverOptions())
			data := make([]byte, a.Size())
			fillPattern(newRand(7), data)
			m := &model{b: data}
			mustWrite(t, a, m, data, 0)
			spare := NewMemDevice(8 << 20)
			if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			all := append(append([]*MemDevice(nil), mems...), spare)
			sb0 := readSB(t, mems[0])
			var crash []*MemDevice
			var crashBackup *memBackup
			bf := &memBackup{}
			ReshapeHook = func(point string, pos, recorded, total uint64) {
				if point == "checkpoint" && recorded == 0 && crash == nil {
					for _, d := range all {
						crash = append(crash, cloneMem(t, d))
					}
					crashBackup = bf.clone()
				}
			}
			defer func() { ReshapeHook = nil }()
			if err := a.StartReshape(ReshapeStart{RaidDisks: c.n + 1, Backup: bf}); err != nil {
				t.Fatal(err)
			}
			ReshapeHook = nil
			if crash == nil {
				t.Fatal("no checkpoint inside the critical section")
			}
			od := c.n - 1
			if c.level == "raid6" {
				od--
			}
			end := criticalEnd(128, 128, od, od+1)
			for i, d := range all {
				s := readSB(t, d)
				if s.FeatureMap&superblock.FeatureReshapeActive == 0 || s.FeatureMap&superblock.FeatureNewOffset != 0 ||
					s.NewOffset != 0 || s.DataOffset != sb0.DataOffset || s.ReshapePosition < end {
					t.Errorf("member %d after the critical section: features %#x new_offset %d data_offset %d pos %d (critical end %d)",
						i, s.FeatureMap, s.NewOffset, s.DataOffset, s.ReshapePosition, end)
				}
			}
			h, err := backupfile.Decode(bf.b[:512])
			if err != nil || h.Length != 0 || h.DevStart != 8 || h.SetUUID != sb0.SetUUID {
				t.Fatalf("backup after the critical section: %+v %v (want forgotten: length 0)", h, err)
			}
			ch, err := backupfile.Decode(crashBackup.b[:512])
			if err != nil || ch.ArrayStart != 0 || ch.Length < end || ch.Version != 1 {
				t.Fatalf("backup inside the critical section: %+v %v", ch, err)
			}
			if got := crashBackup.b[4096 : 4096+ch.Length*512]; string(got) != string(data[:ch.Length*512]) {
				t.Fatal("the backup does not hold the array's first sectors")
			}
			checkContent(t, a, m)
			if err := a.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, grown(m, a))
			a.Close()

			// the crash copy: superblocks at 0, the first new stripe torn
			if s := readSB(t, crash[0]); s.ReshapePosition != 0 {
				t.Fatalf("crash copy records %d", s.ReshapePosition)
			}
			for _, d := range crash {
				d.WriteAt(make([]byte, 64<<10), int64(sb0.DataOffset)*512)
			}
			var ds []Device
			for _, d := range crash {
				ds = append(ds, d)
			}
			if _, err := Open(ds, recoverOptions()); err == nil || !errors.Is(err, ErrBackupNeeded) {
				t.Fatalf("opened inside the critical section without the backup: %v", err)
			}
			o := recoverOptions()
			o.ReshapeBackup = crashBackup
			b, err := Open(ds, o)
			if err != nil {
				t.Fatal(err)
			}
			if ok, p := b.Reshaping(); !ok || p != ch.Length {
				t.Fatalf("restored: reshaping %v at %d, want %d", ok, p, ch.Length)
			}
			if s := readSB(t, crash[0]); s.ReshapePosition != ch.Length {
				t.Fatalf("restored: superblock records %d, want %d", s.ReshapePosition, ch.Length)
			}
			checkContent(t, b, m)
			if err := b.Reshape(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkContent(t, b, grown(m, b))
			b.Close()
		})
	}
}

// grown is m after a growth of a: the added capacity reads as zeroes.
func grown(m *model, a *Array) *model {
	b := make([]byte, a.Size())
	copy(b, m.b)
	return &model{b: b}
}
