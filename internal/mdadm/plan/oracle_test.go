package plan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/superblock"
)

// requireTool finds a host tool; without it the test is skipped, except
// under CI where it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed in CI: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// writeImages writes each planned member to a sparse file of its device's
// size in dir and returns the paths by Options.Devices index.
func writeImages(t *testing.T, dir string, o Options, r *Result) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, m := range r.Members {
		p := filepath.Join(dir, fmt.Sprintf("m%02d.img", m.Device))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(int64(o.Devices[m.Device].Sectors) * 512); err != nil {
			t.Fatal(err)
		}
		for _, w := range m.Writes {
			if _, err := f.WriteAt(w.Data, w.Offset); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		out[m.Device] = p
	}
	return out
}

// examineFields parses `mdadm --examine` output into label -> value.
func examineFields(out string) map[string]string {
	f := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, " : ")
		if !ok {
			continue
		}
		f[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return f
}

// mdadmArraySizeKiB is the "Array Size" mdadm --examine prints (its own
// formula from the superblock, not the kernel's).
func mdadmArraySizeKiB(sb *superblock.Superblock) (uint64, bool) {
	dd, denom := uint64(0), uint64(1)
	switch sb.Level {
	case 1:
		dd = 1
	case 4, 5:
		dd = uint64(sb.RaidDisks) - 1
	case 6:
		dd = uint64(sb.RaidDisks) - 2
	case 10:
		near, far, _ := RAID10Copies(sb.Layout)
		dd, denom = uint64(sb.RaidDisks), uint64(near*far)
	}
	if dd == 0 {
		return 0, false
	}
	return sb.Size * 512 * dd / denom >> 10, true
}

var oracleCases = []struct {
	name string
	o    func() Options
}{
	{"raid1-1.2", func() Options { return base("raid1", 2, devs(100*mib, 100*mib)) }},
	{"raid1-1.0-bitmap", func() Options {
		o := base("raid1", 2, devs(100*mib, 100*mib))
		o.Metadata, o.Bitmap = "1.0", "internal"
		return o
	}},
	{"raid1-1.1-bitmap-4M-spare", func() Options {
		o := base("raid1", 2, devs(100*mib, 100*mib, 120*mib))
		o.Metadata, o.Bitmap, o.BitmapChunk, o.Name, o.Homehost = "1.1", "internal", 4<<20, "bm", "any"
		return o
	}},
	{"raid5-4", func() Options { return base("raid5", 4, devs(64*mib, 64*mib, 64*mib, 64*mib)) }},
	{"raid6-parity-first-6", func() Options {
		o := base("raid6", 5, devs(64*mib, 64*mib, 64*mib, 64*mib, 64*mib))
		o.Layout, o.ChunkKiB, o.Metadata = "parity-first-6", 64, "1.0"
		return o
	}},
	{"raid10-f2-3", func() Options {
		o := base("raid10", 3, devs(203776, 203776, 203776))
		o.Layout, o.Metadata, o.Bitmap = "f2", "1.1", "internal"
		return o
	}},
	{"raid0-unequal", func() Options { return base("raid0", 3, devs(64*mib, 80*mib, 96*mib)) }},
	{"linear-1.0", func() Options {
		o := base("linear", 2, devs(64*mib, 32*mib))
		o.Metadata, o.Homehost = "1.0", "<none>"
		return o
	}},
	{"raid4-spare-missing", func() Options {
		o := base("raid4", 3, devs(64*mib, 0, 64*mib, 64*mib))
		o.MDDevice = "/dev/md/r4"
		return o
	}},
	{"raid1-130", func() Options {
		sizes := make([]uint64, 130)
		for i := range sizes {
			sizes[i] = 8 * mib
		}
		o := base("raid1", 130, devs(sizes...))
		for i := range o.Devices {
			o.Devices[i].Path = fmt.Sprintf("/dev/x%d", i)
		}
		return o
	}},
}

// TestHostExamine writes planned members to sparse image files and checks
// that the host's mdadm 4.2 --examine accepts them (checksum correct) and
// shows the planned values.
func TestHostExamine(t *testing.T) {
	mdadm := requireTool(t, "mdadm")
	for _, tc := range oracleCases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o()
			r := mustPlan(t, o)
			imgs := writeImages(t, t.TempDir(), o, r)
			for _, m := range r.Members {
				if tc.name == "raid1-130" && m.DevNumber > 2 {
					continue
				}
				out, err := exec.Command(mdadm, "--examine", imgs[m.Device]).CombinedOutput()
				if err != nil {
					t.Fatalf("mdadm --examine %s: %v\n%s", m.Path, err, out)
				}
				f := examineFields(string(out))
				sb := m.Superblock
				want := map[string]string{
					"Magic":          "a92b4efc",
					"Version":        r.Metadata,
					"Feature Map":    fmt.Sprintf("0x%x", sb.FeatureMap),
					"Array UUID":     superblock.FormatUUID(r.UUID),
					"Name":           r.Name,
					"Raid Level":     r.LevelName,
					"Raid Devices":   fmt.Sprint(r.RaidDisks),
					"Super Offset":   fmt.Sprintf("%d sectors", sb.SuperOffset),
					"Device UUID":    superblock.FormatUUID(sb.DeviceUUID),
					"Checksum":       fmt.Sprintf("%x - correct", sb.Checksum),
					"Events":         "0",
					"Bad Block Log":  fmt.Sprintf("512 entries available at offset %d sectors", sb.BBLogOffset),
					"Avail Dev Size": fmt.Sprintf("%d sectors", sb.DataSize),
				}
				if !strings.HasPrefix(f["Avail Dev Size"], want["Avail Dev Size"]) {
					t.Errorf("%s: Avail Dev Size %q, want %q", m.Path, f["Avail Dev Size"], want["Avail Dev Size"])
				}
				delete(want, "Avail Dev Size")
				if r.ResyncOffset == superblock.MaxSector {
					want["State"] = "clean"
				} else {
					want["State"] = "active"
				}
				if sb.DataOffset != 0 {
					want["Data Offset"] = fmt.Sprintf("%d sectors", sb.DataOffset)
				}
				if r.Bitmap {
					want["Internal Bitmap"] = fmt.Sprintf("%d sectors from superblock", r.BitmapOffset)
				}
				if r.LayoutName != "" && (r.Level != LevelRAID0 || sb.FeatureMap&superblock.FeatureRAID0Layout != 0) {
					want["Layout"] = r.LayoutName
				}
				switch r.Level {
				case 0, 4, 5, 6, 10:
					want["Chunk Size"] = fmt.Sprintf("%dK", r.ChunkKiB)
				}
				if asize, ok := mdadmArraySizeKiB(sb); ok {
					if !strings.HasPrefix(f["Array Size"], fmt.Sprintf("%d KiB", asize)) {
						t.Errorf("%s: Array Size %q, want %d KiB", m.Path, f["Array Size"], asize)
					}
				}
				if m.Role == superblock.RoleSpare {
					want["Device Role"] = "spare"
				} else {
					want["Device Role"] = fmt.Sprintf("Active device %d", m.Role)
				}
				state := make([]byte, r.RaidDisks)
				for i := range state {
					state[i] = 'A'
				}
				for _, s := range r.MissingSlots {
					state[s] = '.'
				}
				want["Array State"] = string(state) + " ('A' == active, '.' == missing, 'R' == replacing)"
				for k, v := range want {
					if f[k] != v {
						t.Errorf("%s: %s = %q, want %q", m.Path, k, f[k], v)
					}
				}
			}
		})
	}
}

// TestHostExamineBitmap checks planned bitmaps with the host's mdadm -X,
// which needs a (read-only) loop device.
func TestHostExamineBitmap(t *testing.T) {
	mdadm := requireTool(t, "mdadm")
	losetup := requireTool(t, "losetup")
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("mdadm -X on images needs root for losetup in CI")
		}
		t.Skip("mdadm -X on images needs root for losetup")
	}
	for _, tc := range oracleCases {
		o := tc.o()
		if o.Bitmap != "internal" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			r := mustPlan(t, o)
			imgs := writeImages(t, t.TempDir(), o, r)
			m := r.Members[0]
			out, err := exec.Command(losetup, "-r", "-f", "--show", imgs[m.Device]).CombinedOutput()
			if err != nil {
				t.Fatalf("losetup: %v %s", err, out)
			}
			loop := strings.TrimSpace(string(out))
			defer exec.Command(losetup, "-d", loop).Run()
			out, err = exec.Command(mdadm, "-X", loop).CombinedOutput()
			if err != nil {
				t.Fatalf("mdadm -X: %v\n%s", err, out)
			}
			f := examineFields(string(out))
			chunks := (r.BitmapSyncSize*512 + r.BitmapChunk - 1) / r.BitmapChunk
			want := map[string]string{
				"Filename":  loop,
				"Magic":     "6d746962",
				"Version":   "4",
				"UUID":      superblock.FormatUUID(r.UUID),
				"Events":    "0",
				"State":     "OK",
				"Chunksize": humanChunk(r.BitmapChunk),
				"Daemon":    "5s flush period",
				"Sync Size": fmt.Sprintf("%d", r.BitmapSyncSize/2),
				"Bitmap":    fmt.Sprintf("%d bits (chunks), %d dirty (100.0%%)", chunks, chunks),
			}
			for k, v := range want {
				got := f[k]
				if k == "Sync Size" {
					got, _, _ = strings.Cut(got, " ")
				}
				if got != v {
					t.Errorf("-X %s = %q, want %q\n%s", k, got, v, out)
				}
			}
		})
	}
}

// humanChunk is mdadm -X's "Chunksize" text (bitmap.c human_chunksize).
func humanChunk(b uint64) string {
	units := []string{"B", "KB", "MB", "GB"}
	i := 0
	for b >= 1024 && b%1024 == 0 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", b, units[i])
}
