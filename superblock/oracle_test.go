package superblock

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostMdadm returns the host's mdadm, the cheap oracle for the on-disk
// format (it reads plain image files). Without it the test fails under CI
// (CI=true) and is skipped elsewhere.
func hostMdadm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mdadm"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mdadm", "/sbin/mdadm"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("host mdadm not found (install the mdadm package)")
	}
	t.Skip("host mdadm not found")
	return ""
}

// writeImage makes a sparse image of size bytes with each blob at its offset.
func writeImage(t *testing.T, size int64, blobs map[int64][]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "member.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range blobs {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// examine runs mdadm with args on img and returns "Label : value" lines as
// a map (first occurrence of each label) plus the raw text.
func examine(t *testing.T, mdadm string, args ...string) (map[string]string, string) {
	t.Helper()
	cmd := exec.Command(mdadm, args...)
	cmd.Env = append(os.Environ(), "MDADM_NO_UDEV=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, " : ")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := m[k]; !dup {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, string(out)
}

func TestHostMdadmExamineV1(t *testing.T) {
	mdadm := hostMdadm(t)
	const size = 64 << 20
	for minor := 0; minor <= 2; minor++ {
		t.Run(fmt.Sprintf("1.%d", minor), func(t *testing.T) {
			sb := mkSB(minor)
			sb.Level, sb.Layout, sb.ChunkSize, sb.RaidDisks = LevelRAID5, 2, 1024, 3
			sb.DevNumber = 1
			sb.DevRoles[2] = 2
			sb.SetNameString(fmt.Sprintf("oracle:v1%d", minor))
			sb.SetUUID[15] = byte(minor)
			sb.Events = 4242 + uint64(minor)
			sb.Size = sb.DataSize &^ 1023
			sb.FeatureMap = FeatureBadBlocks
			sb.BBLogShift = 0
			// Stored and parsed by us, then shown by mdadm.
			raw := sb.MarshalWithChecksum()
			if _, err := Parse(raw); err != nil {
				t.Fatalf("own Parse: %v", err)
			}
			if err := sb.CheckDevice(size / 512); err != nil {
				t.Fatalf("own CheckDevice: %v", err)
			}
			bbl, err := MarshalBadBlocks([]BadBlock{{Start: 100000, Len: 8}, {Start: 3000, Len: 600}}, sb.BBLogShift, int(sb.BBLogSize)*512)
			if err != nil {
				t.Fatal(err)
			}
			sbAt := int64(sb.SuperOffset) * 512
			img := writeImage(t, size, map[int64][]byte{
				sbAt:                             raw,
				sbAt + int64(sb.BBLogOffset)*512: bbl,
			})
			m, out := examine(t, mdadm, "--examine", img)
			dataOffset := ""
			if sb.DataOffset != 0 {
				dataOffset = fmt.Sprintf("%d sectors", sb.DataOffset)
			}
			want := map[string]string{
				"Magic":          "a92b4efc",
				"Version":        fmt.Sprintf("1.%d", minor),
				"Feature Map":    "0x8",
				"Array UUID":     FormatUUID(sb.SetUUID),
				"Name":           sb.Name(),
				"Raid Level":     "raid5",
				"Raid Devices":   "3",
				"Avail Dev Size": fmt.Sprintf("%d sectors", sb.DataSize),
				"Data Offset":    dataOffset,
				"Super Offset":   fmt.Sprintf("%d sectors", sb.SuperOffset),
				"Device UUID":    FormatUUID(sb.DeviceUUID),
				"Checksum":       fmt.Sprintf("%x - correct", sb.Checksum),
				"Events":         fmt.Sprint(sb.Events),
				"Layout":         "left-symmetric",
				"Chunk Size":     "512K",
				"Device Role":    "Active device 1",
				"Bad Block Log":  fmt.Sprintf("512 entries available at offset %d sectors - bad blocks present.", sb.BBLogOffset),
				"State":          "clean",
			}
			for k, v := range want {
				got, ok := m[k]
				if v == "" {
					if ok {
						t.Errorf("%s printed as %q, want absent", k, got)
					}
					continue
				}
				if !strings.HasPrefix(got, v) {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !strings.HasPrefix(m["Array State"], "AAA ") {
				t.Errorf("Array State = %q", m["Array State"])
			}
			if t.Failed() {
				t.Logf("mdadm --examine:\n%s", out)
			}

			// The bad-block log as mdadm reads it.
			_, bbOut := examine(t, mdadm, "--examine-badblocks", img)
			wantBB := fmt.Sprintf("Bad-blocks on %s:\n%20d for %d sectors\n%20d for %d sectors\n%20d for %d sectors\n",
				img, 3000, 512, 3512, 88, 100000, 8)
			if bbOut != wantBB {
				t.Errorf("--examine-badblocks:\n%s\nwant\n%s", bbOut, wantBB)
			}

			// A stale checksum: mdadm's "expected" value is ours, and our
			// error message carries the same text.
			raw[0x20] ^= 0x01 // change the name, keep sb_csum
			img2 := writeImage(t, size, map[int64][]byte{sbAt: raw})
			m2, _ := examine(t, mdadm, "--examine", img2)
			want2 := fmt.Sprintf("%x - expected %x", sb.Checksum, Checksum(raw))
			if m2["Checksum"] != want2 {
				t.Errorf("corrupted: mdadm says %q, want %q", m2["Checksum"], want2)
			}
			_, err = Parse(raw)
			if fes := formatErrors(t, err); len(fes) != 1 || fes[0].Msg != want2 {
				t.Errorf("own Parse of corrupted: %v", err)
			}
		})
	}
}

func TestHostMdadmExamine090(t *testing.T) {
	mdadm := hostMdadm(t)
	const size = 64<<20 + 12345
	sb := mk090()
	sb.Size = uint32(Offset090(size) >> 10)
	raw := sb.MarshalWithChecksum()
	img := writeImage(t, size, map[int64][]byte{int64(Offset090(size)): raw})
	m, out := examine(t, mdadm, "--examine", img)
	want := map[string]string{
		"Magic":         "a92b4efc",
		"Version":       "0.90.00",
		"UUID":          FormatUUID(sb.UUID()),
		"Raid Level":    "raid1",
		"Used Dev Size": fmt.Sprint(sb.Size),
		"Raid Devices":  "2",
		"Total Devices": "2",
		"State":         "clean",
		"Checksum":      fmt.Sprintf("%x - correct", sb.Checksum),
		"Events":        fmt.Sprint(sb.Events()),
	}
	for k, v := range want {
		if got := m[k]; !strings.HasPrefix(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if t.Failed() {
		t.Logf("mdadm --examine:\n%s", out)
	}
	raw[0x200+128+12] ^= 1 // disk 1 raid_disk
	img2 := writeImage(t, size, map[int64][]byte{int64(Offset090(size)): raw})
	m2, _ := examine(t, mdadm, "--examine", img2)
	want2 := fmt.Sprintf("%x - expected %x", sb.Checksum, Checksum090(raw, false))
	if m2["Checksum"] != want2 {
		t.Errorf("corrupted: mdadm says %q, want %q", m2["Checksum"], want2)
	}
	if _, err := Parse090(raw); err == nil || !strings.Contains(err.Error(), want2) {
		t.Errorf("own Parse090 of corrupted: %v", err)
	}
}
