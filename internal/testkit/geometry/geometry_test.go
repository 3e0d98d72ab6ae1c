//go:build linux

package geometry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/ioctl"
)

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }
func boolp(v bool) *bool   { return &v }

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]ioctl.Override
		wantErr string
	}{
		{in: "", want: map[string]ioctl.Override{}},
		{in: "/dev/sdb:lbs=4096,pbs=4096,io_opt=1048576", want: map[string]ioctl.Override{
			"/dev/sdb": {LogicalBlockSize: u32(4096), PhysicalBlockSize: u32(4096), IOOpt: u32(1048576)}}},
		{in: "a.img:size=0x100000 ; *:rotational=1,io_min=0", want: map[string]ioctl.Override{
			"a.img": {Size: u64(1 << 20)},
			"*":     {Rotational: boolp(true), IOMin: u32(0)}}},
		{in: "/dev/disk/by-id/x:y:lbs=512", want: map[string]ioctl.Override{
			"/dev/disk/by-id/x:y": {LogicalBlockSize: u32(512)}}},
		{in: "/dev/sdb", wantErr: "want PATH:key=value"},
		{in: "/dev/sdb:lbs", wantErr: "not key=value"},
		{in: "/dev/sdb:lbs=1000", wantErr: "power of two"},
		{in: "/dev/sdb:lbs=256", wantErr: "power of two"},
		{in: "/dev/sdb:colour=red", wantErr: "bad number"},
		{in: "/dev/sdb:colour=1", wantErr: "unknown key"},
		{in: "/dev/sdb:rotational=2", wantErr: "0 or 1"},
		{in: "/dev/sdb:io_opt=99999999999", wantErr: "too large"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("Parse(%q) = %d entries, want %d", tt.in, len(got), len(tt.want))
		}
		for k, w := range tt.want {
			g, ok := got[k]
			if !ok {
				t.Errorf("Parse(%q): no entry %q", tt.in, k)
				continue
			}
			base := ioctl.Geometry{Size: 7, LogicalBlockSize: 7, PhysicalBlockSize: 7, IOMin: 7, IOOpt: 7}
			if g.Apply(base) != w.Apply(base) {
				t.Errorf("Parse(%q)[%q] applies as %+v, want %+v", tt.in, k, g.Apply(base), w.Apply(base))
			}
		}
	}
}

// TestFromEnv: the overrides Env names are installed for their paths (the
// exact path before "*") and GetGeometry applies them; a malformed value
// is an error naming Env and installs nothing.
func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.img")
	q := filepath.Join(dir, "e.img")
	for _, f := range []string{p, q} {
		if err := os.WriteFile(f, make([]byte, 8192), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ioctl.SetOverride("*", ioctl.Override{})
		ioctl.SetOverride(p, ioctl.Override{})
	})
	geom := func(path string) ioctl.Geometry {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		g, err := ioctl.GetGeometry(f)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	t.Setenv(Env, "*:io_opt=65536;"+p+":lbs=4096,pbs=4096,io_opt=1048576")
	if err := FromEnv(); err != nil {
		t.Fatal(err)
	}
	if g := geom(p); g.LogicalBlockSize != 4096 || g.PhysicalBlockSize != 4096 || g.IOOpt != 1048576 || g.Size != 8192 {
		t.Errorf("exact override: got %+v", g)
	}
	if g := geom(q); g.IOOpt != 65536 || g.LogicalBlockSize != 512 || g.Size != 8192 {
		t.Errorf("wildcard override: got %+v", g)
	}
	ioctl.SetOverride("*", ioctl.Override{})
	ioctl.SetOverride(p, ioctl.Override{})
	t.Setenv(Env, q+":size=4096;junk")
	if err := FromEnv(); err == nil || !strings.Contains(err.Error(), Env+`: entry "junk"`) {
		t.Errorf("malformed %s: err = %v", Env, err)
	}
	if g := geom(q); g.Size != 8192 {
		t.Errorf("a malformed value installed an override: got %+v", g)
	}
}
