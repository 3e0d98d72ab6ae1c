package daemon

import (
	"errors"
	"testing"

	"mdtool/internal/serve/dmshim"
)

// TestShimDecision: the shim goes on a door that cannot say the geometry
// (NBD: any chunked array; ublk: a full stripe or chunk that is no power
// of two) when device-mapper is there; a re-attached door keeps what its
// record says, whatever the door could say now.
func TestShimDecision(t *testing.T) {
	raid5x4 := dmshim.Geometry{Size: 3 << 30, Chunk: 512 << 10, Stripes: 3}
	raid10x4 := dmshim.Geometry{Size: 2 << 30, Chunk: 512 << 10, Stripes: 2}
	dm := func() error { return nil }
	noDM := func() error { return errors.New("no device-mapper") }
	const id = "mdtool:aa"
	for _, c := range []struct {
		name  string
		kind  string
		rec   *DoorRecord
		g     dmshim.Geometry
		ok    bool
		avail func() error
		want  bool
	}{
		{"ublk 3 stripes", DoorUblk, nil, raid5x4, true, dm, true},
		{"ublk 2 stripes: powers of two", DoorUblk, nil, raid10x4, true, dm, false},
		{"nbd 2 stripes", DoorNBD, nil, raid10x4, true, dm, true},
		{"nbd, no device-mapper", DoorNBD, nil, raid5x4, true, noDM, false},
		{"no striped geometry (raid1)", DoorNBD, nil, dmshim.Geometry{}, false, dm, false},
		{"re-attach with shim", DoorUblk, &DoorRecord{Kind: DoorUblk, Backend: id, Shim: "mdtool-x"}, raid10x4, true, noDM, true},
		{"re-attach without shim", DoorNBD, &DoorRecord{Kind: DoorNBD, Backend: id}, raid5x4, true, dm, false},
		{"record of another array", DoorNBD, &DoorRecord{Kind: DoorNBD, Backend: "mdtool:bb"}, raid5x4, true, dm, true},
		{"record of another door", DoorUblk, &DoorRecord{Kind: DoorNBD, Backend: id}, raid5x4, true, dm, true},
	} {
		if got, note := shimDecision(c.kind, c.rec, id, c.g, c.ok, c.avail); got != c.want {
			t.Errorf("%s: shim %v (%s), want %v", c.name, got, note, c.want)
		}
	}
}
