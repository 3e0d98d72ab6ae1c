package engine

import (
	"errors"
	"testing"

	"mdtool/superblock"
)

// TestOpenRefusesZeroSize: Open refuses an array whose size is 0 (a
// component size of 0, or members whose data area is empty) instead of
// serving 0 bytes.
func TestOpenRefusesZeroSize(t *testing.T) {
	for _, c := range []struct {
		s    spec
		edit func(sb *superblock.Superblock)
		want error
	}{
		{spec{level: "raid1", n: 2}, func(sb *superblock.Superblock) { sb.Size = 0 }, ErrZeroSize},
		{spec{level: "raid5", n: 3, chunkKiB: 64}, func(sb *superblock.Superblock) { sb.Size = 0 }, ErrZeroSize},
		{spec{level: "raid10", n: 2, chunkKiB: 64}, func(sb *superblock.Superblock) { sb.Size = 0 }, ErrZeroSize},
		// An empty data area: super_1_load refuses data_size < 10 sectors
		// ("data_size too small"), so validation leaves every member out
		// before the size is computed.
		{spec{level: "raid0", n: 2, chunkKiB: 64}, func(sb *superblock.Superblock) { sb.DataSize = 0; sb.Size = 0 }, ErrInvalidSuper},
		{spec{level: "linear", n: 2}, func(sb *superblock.Superblock) { sb.DataSize = 0; sb.Size = 0 }, ErrInvalidSuper},
	} {
		t.Run(c.s.String(), func(t *testing.T) {
			mems := create(t, c.s)
			// The unchanged array opens.
			a := open(t, mems, testOptions())
			if a.Size() == 0 {
				t.Fatal("size 0 before the edit")
			}
			a.Close()
			for _, m := range mems {
				m.Reopen()
				b := make([]byte, 4096)
				if _, err := m.ReadAt(b, 4096); err != nil {
					t.Fatal(err)
				}
				sb, err := superblock.Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				c.edit(sb)
				if _, err := m.WriteAt(sb.MarshalWithChecksum(), 4096); err != nil {
					t.Fatal(err)
				}
			}
			a, err := Open(devices(mems), testOptions())
			if err == nil {
				a.Close()
				t.Fatalf("opened an array of %d bytes", a.Size())
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
}
