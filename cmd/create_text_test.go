package cmd

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdadm/plan"
)

const mib = 1024 * 1024 / 512 // sectors per MiB

// rep is n copies of v.
func rep(v uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func devs(sectors ...uint64) []plan.Device {
	out := make([]plan.Device, len(sectors))
	for i, s := range sectors {
		if s == 0 {
			out[i] = plan.Device{Path: "missing", Missing: true}
			continue
		}
		out[i] = plan.Device{Path: fmt.Sprintf("/dev/sd%c", 'a'+i), Sectors: s}
	}
	return out
}

func base(level string, n int, d []plan.Device) plan.Options {
	return plan.Options{
		MDDevice:       "/dev/md0",
		Level:          level,
		RaidDevices:    n,
		SpareDevices:   len(d) - n,
		SystemHostname: "host",
		Now:            time.Unix(1700000000, 0),
		Devices:        d,
	}
}

// The refusals' text and exit status, word for word as before the rules
// library returned typed refusals (mdadm 4.2's text where mdadm has one).
func TestPlanRefusalText(t *testing.T) {
	d2 := devs(64*mib, 64*mib)
	d4 := devs(64*mib, 64*mib, 64*mib, 64*mib)
	tests := []struct {
		name   string
		mod    func(o *plan.Options)
		want   string
		status int
	}{
		{"no level", func(o *plan.Options) { o.Level = "" }, "a RAID level is needed to create an array.", 1},
		{"bad level", func(o *plan.Options) { o.Level = "raid7" }, "invalid raid level: raid7", 2},
		{"faulty", func(o *plan.Options) { o.Level = "faulty" }, "level faulty is not supported", 2},
		{"container", func(o *plan.Options) { o.Level = "container" }, "1.x metadata does not support containers", 1},
		{"metadata", func(o *plan.Options) { o.Metadata = "2.0" }, "unrecognised metadata identifier: 2.0", 2},
		{"metadata ddf", func(o *plan.Options) { o.Metadata = "ddf" }, "ddf metadata is not supported", 2},
		{"0.90 raid0", func(o *plan.Options) { o.Metadata = "0.90"; o.Level = "0" }, "0.90 metadata does not support layouts for RAID0", 1},
		{"0.90 28 devices", func(o *plan.Options) {
			o.Metadata = "0.90"
			o.Level = "1"
			o.RaidDevices = 28
			o.Devices = devs(make([]uint64, 28)...)
		}, "0.90 metadata supports at most 27 devices per array", 1},
		{"0.90 size 4T", func(o *plan.Options) { o.Metadata = "00.90"; o.SizeKiB = 4 << 30 }, "0.90 metadata supports at most 4 terabytes per device", 1},
		{"0.90 data offset", func(o *plan.Options) { o.Metadata = "0"; o.DataOffset = 2048 }, "data-offset not support for 0.90", 1},
		{"0.90 spares", func(o *plan.Options) {
			o.Metadata = "0.90"
			o.RaidDevices = 2
			o.SpareDevices = 26
			o.Devices = devs(rep(64*mib, 28)...)
		}, "Too many devices: 0.90 metadata only supports 27", 1},
		{"0.90 too small", func(o *plan.Options) { o.Metadata = "0.90"; o.Devices = devs(64*mib, 100) }, "/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"layout raid1", func(o *plan.Options) { o.Layout = "n2" }, "layout not meaningful for raid1 arrays.", 2},
		{"chunk raid1", func(o *plan.Options) { o.ChunkKiB = 64 }, "specifying chunk size is forbidden for this level", 1},
		{"chunk small", func(o *plan.Options) { o.Level = "raid0"; o.ChunkKiB = 2 }, "invalid chunk/rounding value: 2K", 2},
		{"chunk not pow2", func(o *plan.Options) { o.Level = "raid5"; o.ChunkKiB = 48 }, "chunk size 48K is not a power of 2, which raid5 requires", 1},
		{"name long", func(o *plan.Options) { o.Name = strings.Repeat("x", 33) }, "name '" + strings.Repeat("x", 33) + "' is too long, 32 chars max.", 2},
		{"bitmap file raid0", func(o *plan.Options) { o.Level = "0"; o.Bitmap = "/tmp/bm" }, "bitmaps not meaningful with level raid0", 1},
		{"bitmap typo", func(o *plan.Options) { o.Bitmap = "intern" }, "bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'intern'", 2},
		{"bitmap chunk", func(o *plan.Options) { o.Bitmap = "internal"; o.BitmapChunk = 3000 }, "invalid bitmap chunksize: 3000", 2},
		{"n1", func(o *plan.Options) { o.RaidDevices = 1; o.SpareDevices = 1 }, "'1' is an unusual number of drives for an array, so it is probably\n     a mistake.  If you really mean it you will need to specify --force before\n     setting the number of drives.", 2},
		{"n0", func(o *plan.Options) { o.RaidDevices = 0; o.SpareDevices = 2 }, "no raid-devices specified.", 1},
		{"spares raid0", func(o *plan.Options) { o.Level = "raid0"; o.RaidDevices = 1; o.SpareDevices = 1; o.Force = true }, "raid level raid0 is incompatible with spare-devices setting.", 2},
		{"raid6 3", func(o *plan.Options) { o.Level = "6"; o.RaidDevices = 2; o.SpareDevices = 0; o.Devices = d2 }, "at least 4 raid-devices needed for level 6", 1},
		{"raid5 1", func(o *plan.Options) { o.Level = "5"; o.RaidDevices = 1; o.SpareDevices = 1; o.Force = true }, "at least 2 raid-devices needed for level 5", 1},
		{"too many devs", func(o *plan.Options) { o.Devices = d4 }, "You have listed more devices (4) than are in the array(2)!", 1},
		{"too few devs", func(o *plan.Options) { o.RaidDevices = 4 }, "You haven't given enough devices (real or missing) to create this array", 1},
		{"bitmap raid0", func(o *plan.Options) { o.Level = "0"; o.Bitmap = "none" }, "bitmaps not meaningful with level raid0", 1},
		{"bitmap linear", func(o *plan.Options) { o.Level = "linear"; o.Bitmap = "internal" }, "bitmaps not meaningful with level linear", 1},
		{"bitmap multipath", func(o *plan.Options) { o.Level = "mp"; o.Bitmap = "internal" }, "bitmaps not meaningful with level multipath", 1},
		{"chunk multipath", func(o *plan.Options) { o.Level = "multipath"; o.ChunkKiB = 64 }, "specifying chunk size is forbidden for this level", 1},
		{"spares multipath", func(o *plan.Options) {
			o.Level = "multipath"
			o.SpareDevices = 1
			o.Devices = append(o.Devices, plan.Device{Path: "/dev/sdc", Sectors: o.Devices[0].Sectors})
		}, "This level does not support spare devices", 1},
		{"missing multipath", func(o *plan.Options) { o.Level = "multipath"; o.Devices[1] = plan.Device{Missing: true} }, "This level does not support missing devices", 1},
		{"raid10 n3 on 2", func(o *plan.Options) { o.Level = "10"; o.Layout = "n3" }, "that layout requires at least 3 devices", 1},
		{"raid10 n1", func(o *plan.Options) { o.Level = "10"; o.Layout = "n1" }, "raid10 layout n1 has no redundancy", 1},
		{"size below chunk", func(o *plan.Options) { o.Level = "0"; o.SizeKiB = 100 }, "Size cannot be smaller than chunk.", 1},
		{"duplicate", func(o *plan.Options) {
			o.Devices = []plan.Device{{Path: "/dev/x", Sectors: 64 * mib}, {Path: "/dev/x", Sectors: 64 * mib}}
		}, "device /dev/x is listed more than once (positions 1 and 2)", 1},
		{"too small", func(o *plan.Options) { o.Devices = devs(64*mib, 1024) }, "device /dev/sdb is too small (512K) for required metadata!\n/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"too small 1.0", func(o *plan.Options) { o.Metadata = "1.0"; o.Devices = devs(64*mib, 20) }, "device /dev/sdb is too small (8K) for required metadata!\n/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"smaller than size", func(o *plan.Options) { o.SizeKiB = 40 * 1024; o.Devices = devs(64*mib, 32*mib) }, "/dev/sdb is smaller than given size. 31744K < 40960K + metadata\ncreate aborted", 1},
		{"all missing", func(o *plan.Options) { o.Devices = devs(0, 0) }, "Subdevs can't be all missing", 1},
		{"missing raid0", func(o *plan.Options) { o.Level = "0"; o.Devices = devs(64*mib, 0) }, "This level does not support missing devices", 1},
		{"raid1 all active missing", func(o *plan.Options) { o.SpareDevices = 1; o.Devices = devs(0, 0, 64*mib) }, "too many missing devices for raid1: 2 of 2 raid devices missing, at most 1 allowed", 1},
		{"raid5 2 missing", func(o *plan.Options) { o.Level = "5"; o.RaidDevices = 4; o.Devices = devs(64*mib, 0, 64*mib, 0) }, "too many missing devices for raid5: 2 of 4 raid devices missing, at most 1 allowed", 1},
		{"raid6 3 missing", func(o *plan.Options) { o.Level = "6"; o.RaidDevices = 4; o.Devices = devs(64*mib, 0, 0, 0) }, "too many missing devices for raid6: 3 of 4 raid devices missing, at most 2 allowed", 1},
		{"raid10 pair missing", func(o *plan.Options) { o.Level = "10"; o.RaidDevices = 4; o.Devices = devs(0, 0, 64*mib, 64*mib) }, "too many missing devices for raid10", 1},
		{"bad md name", func(o *plan.Options) { o.MDDevice = "/dev/foo" }, "/dev/foo is an invalid name for an md device.  Try /dev/md/foo", 1},
		{"bitmap chunk too small", func(o *plan.Options) { o.Bitmap = "internal"; o.BitmapChunk = 512 }, "Given bitmap chunk size not supported.", 1},
		{"data offset overlaps sb", func(o *plan.Options) { o.DataOffset = 8 }, "data offset 8 sectors on /dev/sda overlaps the superblock", 1},
		{"bitmap over data", func(o *plan.Options) { o.Bitmap = "internal"; o.DataOffset = 20 }, "internal bitmap does not fit before the data offset (20 sectors) on /dev/sda", 1},
		{"4Kn data offset", func(o *plan.Options) { o.DataOffset = 2052; o.Devices[0].LogicalBlockSize = 4096 }, "data offset 2052 sectors is not a multiple of the 4096-byte logical block size of /dev/sda", 1},
		{"data offset 1.0", func(o *plan.Options) { o.Metadata = "1.0"; o.DataOffset = 2048 }, "--data-offset cannot be used with 1.0 metadata", 1},
		{"raid0 dangerous multi-zone", func(o *plan.Options) {
			o.Level, o.Layout, o.RaidDevices, o.SpareDevices = "0", "dangerous", 3, 0
			o.Devices = devs(64*mib, 96*mib, 128*mib)
		}, "members of different sizes need a raid0 layout, the md driver would refuse to run this array\nPlease use --layout=original or --layout=alternate", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base("raid1", 2, devs(64*mib, 64*mib))
			tt.mod(&o)
			r, err := plan.Plan(o)
			if err == nil {
				t.Fatalf("Plan succeeded (%d members), want %q", len(r.Members), tt.want)
			}
			var pr *plan.Refusal
			if !errors.As(err, &pr) {
				t.Fatalf("err %v is %T, want *plan.Refusal", err, err)
			}
			code, lines := refusalText(pr)
			if got := strings.Join(lines, "\n"); !strings.HasPrefix(got, tt.want) {
				t.Errorf("text = %q\nwant %q", got, tt.want)
			}
			if code != ExitCode(tt.status) {
				t.Errorf("status %d, want %d", code, tt.status)
			}
		})
	}
}

// The parsers' refusals: text and status 2 (command-line values), or 1
// for the md device names (refused inside Create).
func TestParseRefusalText(t *testing.T) {
	parseLayout := func(level int, s string) func() error {
		return func() error { _, err := plan.ParseLayout(level, s); return err }
	}
	arrayName := func(s string) func() error {
		return func() error { _, err := plan.ArrayName(s); return err }
	}
	for _, tt := range []struct {
		call   func() error
		want   string
		status ExitCode
	}{
		{func() error { _, err := plan.ParseLevel("RAID5"); return err }, "invalid raid level: RAID5", ExitUsage},
		{parseLayout(10, "x2"), "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not x2", ExitUsage},
		{parseLayout(10, "n201"), "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not n201", ExitUsage},
		{parseLayout(0, "n2"), "layout n2 not understood for raid0.", ExitUsage},
		{parseLayout(5, "n2"), "layout n2 not understood for raid5.", ExitUsage},
		{parseLayout(6, "n2"), "layout n2 not understood for raid6.", ExitUsage},
		{parseLayout(1, "n2"), "layout not meaningful for raid1 arrays.", ExitUsage},
		{parseLayout(4, "ls"), "layout not meaningful for raid4 arrays.", ExitUsage},
		{parseLayout(-1, "ls"), "layout not meaningful for linear arrays.", ExitUsage},
		{func() error { _, err := plan.ParseSize("7s"); return err }, "invalid size: 7s", ExitUsage},
		{func() error { _, err := plan.ParseSize("x"); return err }, "invalid size: x", ExitUsage},
		{func() error { _, err := plan.ParseChunk("2"); return err }, "invalid chunk/rounding value: 2", ExitUsage},
		{func() error { _, err := plan.ParseChunk("9s"); return err }, "invalid chunk/rounding value: 9s", ExitUsage},
		{func() error { _, err := plan.ParseBitmapChunk("3"); return err }, "invalid bitmap chunksize: 3", ExitUsage},
		{func() error { return plan.CheckName("name", "a\nb") },
			`invalid name 'a\nb': it contains a control character or an unprintable byte (not allowed: control characters, white space, quotes, '#', '\').`, ExitUsage},
		{func() error { return plan.CheckName("homehost", "a b") },
			`invalid homehost 'a b': it contains white space (not allowed: control characters, white space, quotes, '#', '\').`, ExitUsage},
		{func() error { return plan.CheckName("name", `a"b`) },
			`invalid name 'a"b': it contains a quote (not allowed: control characters, white space, quotes, '#', '\').`, ExitUsage},
		{func() error { return plan.CheckName("name", "a#b") },
			`invalid name 'a#b': it contains '#' (not allowed: control characters, white space, quotes, '#', '\').`, ExitUsage},
		{func() error { return plan.CheckName("name", `a\b`) },
			`invalid name 'a\\b': it contains a backslash (not allowed: control characters, white space, quotes, '#', '\').`, ExitUsage},
		{arrayName("/dev/mdhome"), "/dev/mdhome is an invalid name for an md device.  Try /dev/md/mdhome", ExitFailure},
		{arrayName("/dev/sda1"), "/dev/sda1 is an invalid name for an md device.  Try /dev/md/sda1", ExitFailure},
		{arrayName("/dev/md/"), "/dev/md/ is an invalid name for an md device (empty!).", ExitFailure},
		{arrayName("a/b"), "a/b is an invalid name for an md device.", ExitFailure},
	} {
		err := tt.call()
		var pr *plan.Refusal
		if !errors.As(err, &pr) {
			t.Errorf("%q: err %v (%T), want *plan.Refusal", tt.want, err, err)
			continue
		}
		code, lines := refusalText(pr)
		if got := strings.Join(lines, "\n"); got != tt.want || code != tt.status {
			t.Errorf("text %q status %d\nwant %q status %d", got, code, tt.want, tt.status)
		}
	}
}

// Every kind of refusal has its own wording: none falls through to the
// refusal's debugging text.
func TestEveryRefusalWorded(t *testing.T) {
	for k := plan.Kind(1); k < plan.NumKinds; k++ {
		r := &plan.Refusal{Kind: k, Arg: "x", Device: "/dev/sdz", Level: "raid5",
			Fails: []*plan.Refusal{{Kind: plan.NoFreeSpace, Device: "/dev/sdz"}}}
		code, lines := refusalText(r)
		if len(lines) == 0 || strings.Contains(strings.Join(lines, "\n"), r.Error()) {
			t.Errorf("kind %d has no wording: %q", k, lines)
		}
		if code != ExitFailure && code != ExitUsage {
			t.Errorf("kind %d: exit status %d", k, code)
		}
	}
}

// planError prefixes continuation lines as mdadm does: lines that start
// with spaces are mdadm's indented continuations and get no prefix.
func TestPlanErrorLines(t *testing.T) {
	err := planError(&plan.Refusal{Kind: plan.CreateAborted, Fails: []*plan.Refusal{
		{Kind: plan.DeviceTooSmall, Device: "/dev/sdb", Have: 512}}})
	want := "device /dev/sdb is too small (512K) for required metadata!\nmdtool: /dev/sdb is not suitable for this array.\nmdtool: create aborted"
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Msg != want || ee.Code != 1 {
		t.Errorf("planError = %#v, want code 1 %q", err, want)
	}
	err = planError(&plan.Refusal{Kind: plan.BitmapInvalid, Arg: "intern"})
	want = "bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'intern'"
	if !errors.As(err, &ee) || ee.Msg != want || ee.Code != 2 {
		t.Errorf("planError = %#v, want code 2 %q", err, want)
	}
}

// The notes for which create asks "Continue creating array?", in mdadm
// 4.2's words: unequal raid1 members with the default metadata.
func TestCreateWarningText(t *testing.T) {
	r, err := plan.Plan(base("raid1", 2, devs(64*mib, 80*mib)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range r.Warnings {
		got = append(got, warningText(w))
	}
	want := []string{
		"Note: this array has metadata at the start and\n" +
			"    may not be suitable as a boot device.  If you plan to\n" +
			"    store '/boot' on this device please ensure that\n" +
			"    your boot-loader understands md/v1.x metadata, or use\n" +
			"    --metadata=0.90",
		"largest drive (/dev/sdb) exceeds size (64512K) by more than 1%",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}
