package plan

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/fixture"
	"mdtool/superblock"
)

// fixtureHostname is the hostname of the mdvm guest that made the
// fixtures (mdadm's default homehost there).
const fixtureHostname = "mdvm"

// createStep returns the case's `mdadm --create` command, if any.
func createStep(c *fixture.Case) (string, bool) {
	for _, s := range c.Steps {
		if s.Phase != "setup" {
			continue
		}
		w := strings.Fields(s.Cmd)
		if len(w) > 1 && w[0] == "mdadm" && (w[1] == "--create" || w[1] == "-C") {
			return s.Cmd, true
		}
		for _, x := range w {
			if x == "--create" || x == "-C" {
				return s.Cmd, true
			}
		}
	}
	return "", false
}

// rolesChanged reports whether a step after the create changes member
// roles (fail, remove, add, replace, grow): the kernel then rewrites
// dev_roles and the planned ones no longer apply.
func rolesChanged(c *fixture.Case) bool {
	for _, s := range c.Steps {
		if s.Phase == "capture" {
			continue
		}
		w := " " + s.Cmd + " "
		if !strings.HasPrefix(s.Cmd, "mdadm") || strings.Contains(w, " --create ") {
			continue
		}
		for _, op := range []string{" --fail ", " -f ", " --set-faulty ", " --remove ", " -r ", " --add ", " -a ", " --re-add ", " --replace ", " --grow ", " -G "} {
			if strings.Contains(w, op) {
				return true
			}
		}
	}
	return false
}

// optionsForCase rebuilds the planner options of a fixture case from its
// create command and member sizes.
func optionsForCase(c *fixture.Case) (Options, error) {
	cmd, ok := createStep(c)
	if !ok {
		return Options{}, fmt.Errorf("no create command")
	}
	o, err := parseCreate(cmd)
	if err != nil {
		return Options{}, err
	}
	o.SystemHostname = fixtureHostname
	o.Now = time.Unix(1700000000, 0)
	o.Rand = bytes.NewReader(bytes.Repeat([]byte{0x42}, 16*64))
	for i := range o.Devices {
		if o.Devices[i].Missing {
			continue
		}
		m, ok := c.Member(o.Devices[i].Path)
		if !ok {
			return Options{}, fmt.Errorf("device %s of the create command is not a member of the case", o.Devices[i].Path)
		}
		o.Devices[i].Sectors = uint64(m.Size) / 512
	}
	return o, nil
}

// readMember loads the superblock (and bitmap header, if any) of member i
// from its fixture image.
func readMember(c *fixture.Case, i int) (*superblock.Superblock, *bitmap.Header, error) {
	m := c.Members[i]
	im, err := c.Image(i)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 4096)
	if _, err := im.ReadAt(buf, m.Super.Offset); err != nil {
		return nil, nil, err
	}
	sb, err := superblock.Parse(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", m.Dev, err)
	}
	if sb.FeatureMap&superblock.FeatureBitmapOffset == 0 {
		return sb, nil, nil
	}
	off := m.Super.Offset + int64(sb.BitmapOffset)*512
	hb := make([]byte, bitmap.HeaderSize)
	if _, err := im.ReadAt(hb, off); err != nil {
		return nil, nil, err
	}
	h, err := bitmap.Parse(hb)
	if err != nil {
		return nil, nil, fmt.Errorf("%s bitmap: %v", m.Dev, err)
	}
	return sb, h, nil
}

type fieldCheck struct {
	name      string
	got, want any
}

// TestFixtureGeometry re-plans every fixture case whose create command is
// known and compares the geometry of each member's real superblock (made
// by mdadm 4.2 and rewritten by the Linux 6.1 kernel) with the plan, field
// by field. Random and time fields (UUIDs unless --uuid, ctime/utime,
// events, checksum) and the fields the kernel legitimately rewrites
// (resync_offset after the initial sync, dev_roles after a rebuild) are
// left out.
func TestFixtureGeometry(t *testing.T) {
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixture.LoadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no fixture cases under %s", dir)
	}
	compared := 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if !strings.HasPrefix(c.Metadata, "1.") {
				t.Logf("metadata %s: not planned by this package", c.Metadata)
				return
			}
			if _, ok := createStep(c); !ok {
				t.Logf("no create command recorded")
				return
			}
			o, err := optionsForCase(c)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Plan(o)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			compared++
			for i, m := range c.Members {
				var pm *Member
				for j := range res.Members {
					if res.Members[j].Path == m.Dev {
						pm = &res.Members[j]
					}
				}
				if pm == nil {
					createCmd, _ := createStep(c)
					if !slices.Contains(strings.Fields(createCmd), m.Dev) {
						t.Logf("%s: added after create (not planned)", m.Dev)
						continue
					}
					t.Errorf("%s: not in the plan", m.Dev)
					continue
				}
				got, gotBM, err := readMember(c, i)
				if err != nil {
					t.Fatal(err)
				}
				want := pm.Superblock
				if int64(want.SuperOffset)*512 != m.Super.Offset || pm.SuperOffset != m.Super.Offset {
					t.Errorf("%s: superblock at byte %d, planned %d", m.Dev, m.Super.Offset, pm.SuperOffset)
				}
				checks := []fieldCheck{
					{"level", got.Level, want.Level},
					{"layout", got.Layout, want.Layout},
					{"size", got.Size, want.Size},
					{"chunksize", got.ChunkSize, want.ChunkSize},
					{"raid_disks", got.RaidDisks, want.RaidDisks},
					{"data_offset", got.DataOffset, want.DataOffset},
					{"data_size", got.DataSize, want.DataSize},
					{"super_offset", got.SuperOffset, want.SuperOffset},
					{"feature_map", got.FeatureMap, want.FeatureMap},
					{"bitmap_offset", got.BitmapOffset, want.BitmapOffset},
					{"bblog_shift", got.BBLogShift, want.BBLogShift},
					{"bblog_size", got.BBLogSize, want.BBLogSize},
					{"bblog_offset", got.BBLogOffset, want.BBLogOffset},
					{"max_dev", got.MaxDev, want.MaxDev},
					{"set_name", got.Name(), want.Name()},
					{"dev_number", got.DevNumber, want.DevNumber},
					{"devflags", got.DevFlags, want.DevFlags},
				}
				if o.UUID != nil {
					checks = append(checks, fieldCheck{"set_uuid", got.SetUUID, want.SetUUID})
				}
				// Without a rebuild the kernel keeps the roles mdadm wrote;
				// with one, the recovery spare ends up in RecoverySlot.
				wantRoles := append([]uint16(nil), want.DevRoles...)
				if res.RecoverySpare >= 0 {
					for _, pm2 := range res.Members {
						if pm2.Device == res.RecoverySpare {
							wantRoles[pm2.DevNumber] = uint16(res.RecoverySlot)
						}
					}
				}
				if !rolesChanged(c) {
					checks = append(checks, fieldCheck{"dev_roles", fmt.Sprint(got.DevRoles), fmt.Sprint(wantRoles)})
				}
				if (gotBM == nil) != (pm.BitmapBytes == nil) {
					t.Errorf("%s: bitmap present %v, planned %v", m.Dev, gotBM != nil, pm.BitmapBytes != nil)
				} else if gotBM != nil {
					wantBM, err := bitmap.Parse(pm.BitmapBytes)
					if err != nil {
						t.Fatal(err)
					}
					checks = append(checks,
						fieldCheck{"bitmap version", gotBM.Version, wantBM.Version},
						fieldCheck{"bitmap chunksize", gotBM.ChunkSize, wantBM.ChunkSize},
						fieldCheck{"bitmap sync_size", gotBM.SyncSize, wantBM.SyncSize},
						fieldCheck{"bitmap daemon_sleep", gotBM.DaemonSleep, wantBM.DaemonSleep},
						fieldCheck{"bitmap write_behind", gotBM.WriteBehind, wantBM.WriteBehind},
						fieldCheck{"bitmap uuid = set_uuid", gotBM.UUID, got.SetUUID},
						fieldCheck{"bitmap area bytes", bitmap.AreaSize(gotBM, 4096), uint64(len(pm.BitmapBytes))},
					)
				}
				for _, ck := range checks {
					if fmt.Sprint(ck.got) != fmt.Sprint(ck.want) {
						t.Errorf("%s: %s = %v, planned %v", m.Dev, ck.name, ck.got, ck.want)
					}
				}
			}
			// Array size as the kernel reported it.
			if b, err := c.ReadFile(c.Outputs.Getsize64); err == nil {
				n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
				if err != nil {
					t.Fatalf("getsize64: %v", err)
				}
				if n != res.ArraySizeKiB*1024 {
					t.Errorf("array size %d bytes, planned %d KiB", n, res.ArraySizeKiB)
				}
			}
		})
	}
	if compared == 0 {
		t.Fatal("no fixture case could be compared")
	}
	t.Logf("compared %d fixture cases", compared)
}
