package cmd

import (
	"bytes"
	"os"
	"testing"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

func sbEvents(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	if _, err := f.ReadAt(b, 4096); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return sb.Events
}

// TestTruncatedMemberFailsServed: a member file truncated under the
// running daemon is failed (faulty in the daemon's status, events bumped
// in the survivors' superblocks), the array keeps serving the data over
// NBD, and the truncated file is not extended again.
func TestTruncatedMemberFailsServed(t *testing.T) {
	dir := t.TempDir()
	runDir := dir + "/run"
	devs := mkArray(t, dir, "/dev/md/trunc", 3, 24<<20, "-l5", "-n3", "--assume-clean")
	s := serve(t, runDir, "/dev/md/trunc", devs...)
	const n = 8 << 20
	data := nbdWrite(t, s.nbdURI(), n)
	ev := sbEvents(t, devs[0])
	if err := os.Truncate(devs[1], 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := readArray(t, daemon.PathsFor(runDir, s.name).NBD(), n); !bytes.Equal(got, data) {
		t.Fatal("the array serves other data after a member was truncated")
	}
	st, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range st.Members {
		if m.Path == devs[1] {
			found = true
			if m.State != "faulty" {
				t.Errorf("truncated member is %q, want faulty", m.State)
			}
		}
	}
	if !found {
		t.Errorf("truncated member not in the status: %+v", st.Members)
	}
	// Writes go on, degraded.
	data2 := nbdWrite(t, s.nbdURI(), n)
	if got := readArray(t, daemon.PathsFor(runDir, s.name).NBD(), n); !bytes.Equal(got, data2) {
		t.Error("degraded array does not serve what was written")
	}
	s.stop()
	fi, err := os.Stat(devs[1])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 1<<20 {
		t.Errorf("truncated member re-extended to %d bytes", fi.Size())
	}
	for _, d := range []string{devs[0], devs[2]} {
		if e := sbEvents(t, d); e <= ev {
			t.Errorf("%s: events %d, not bumped from %d", d, e, ev)
		}
	}
}
