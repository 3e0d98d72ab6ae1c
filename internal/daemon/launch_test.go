package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"mdtool/engine"
)

// launchImages makes n zeroed image files (no superblock).
func launchImages(t *testing.T, n int) []LaunchMember {
	t.Helper()
	dir := t.TempDir()
	var ms []LaunchMember
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, "m"+string(rune('0'+i)))
		if err := os.WriteFile(p, make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, LaunchMember{Path: p, DevNumber: i})
	}
	return ms
}

// reopenExclusive fails the test if path is still held (not closed).
func reopenExclusive(t *testing.T, path string) {
	t.Helper()
	fd, err := engine.OpenFile(path, engine.FileOptions{Exclusive: true})
	if err != nil {
		t.Fatalf("%s still held after a failed Launch: %v", path, err)
	}
	fd.Close()
}

func TestLaunchErrors(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		ms := launchImages(t, 2)
		missing := ms[1].Path + ".missing"
		ms[1].Path = missing
		var added []int
		_, err := Launch(LaunchConfig{Name: "md0", Device: "/dev/md0", RunDir: t.TempDir(), Members: ms,
			Added: func(i int) { added = append(added, i) }})
		var oe *MemberOpenError
		if !errors.As(err, &oe) || oe.Path != missing || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("err = %#v, want a MemberOpenError for %s (not exist)", err, missing)
		}
		if len(added) != 1 || added[0] != 0 {
			t.Errorf("Added calls = %v, want [0]", added)
		}
		reopenExclusive(t, ms[0].Path)
	})
	t.Run("wrap", func(t *testing.T) {
		ms := launchImages(t, 2)
		refused := errors.New("refused by the hook")
		_, err := Launch(LaunchConfig{Name: "md0", Device: "/dev/md0", RunDir: t.TempDir(), Members: ms,
			WrapDevice: func(path string, d engine.Device) (engine.Device, error) {
				if path == ms[1].Path {
					return nil, refused
				}
				return d, nil
			}})
		var we *MemberWrapError
		if !errors.As(err, &we) || we.Path != ms[1].Path || we.Err != refused {
			t.Fatalf("err = %#v, want a MemberWrapError for %s", err, ms[1].Path)
		}
		reopenExclusive(t, ms[0].Path)
		reopenExclusive(t, ms[1].Path)
	})
	t.Run("run", func(t *testing.T) {
		ms := launchImages(t, 2)
		_, err := Launch(LaunchConfig{Name: "md0", Device: "/dev/md0", RunDir: t.TempDir(), Members: ms})
		var re *RunError
		if !errors.As(err, &re) {
			t.Fatalf("err = %#v, want a RunError (no superblocks)", err)
		}
		reopenExclusive(t, ms[0].Path)
		reopenExclusive(t, ms[1].Path)
	})
}
