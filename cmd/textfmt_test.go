package cmd

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestHumanSize(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  string
	}{
		{0, ""},
		{5000*1024 - 1, ""},
		{5000 * 1024, " (4.88 MiB 5.12 MB)"},
		{63488 << 9, " (31.00 MiB 32.51 MB)"},    // fixture raid1 member
		{405504 << 9, " (198.00 MiB 207.62 MB)"}, // md-format.md §3.1 sample
		{2<<30 - 1, " (2048.00 MiB 2147.48 MB)"},
		{2 << 30, " (2.00 GiB 2.15 GB)"},
		{976630464 << 10, " (931.39 GiB 1000.07 GB)"},
		{2<<40 - 1, " (2048.00 GiB 2199.02 GB)"},
		{2 << 40, " (2.00 TiB 2.20 TB)"},
		{11721041656 << 9, " (5.46 TiB 6.00 TB)"}, // md-format.md §3.1 sample
		{-1, ""},
	} {
		if got := humanSize(c.bytes); got != c.want {
			t.Errorf("humanSize(%d) = %q, want %q", c.bytes, got, c.want)
		}
	}
}

func TestHumanSizeBrief(t *testing.T) {
	for _, c := range []struct {
		bytes  int64
		prefix int
		want   string
	}{
		{5000*1024 - 1, prefixJEDEC, ""},
		{63488 << 9, prefixJEDEC, "32.51MB"}, // MD_ARRAY_SIZE of the fixture raid1
		{63488 << 9, prefixIEC, "31.00MiB"},
		{3 << 30, prefixJEDEC, "3.22GB"},
		{3 << 30, prefixIEC, "3.00GiB"},
		{3 << 40, prefixJEDEC, "3.30TB"},
		{3 << 40, prefixIEC, "3.00TiB"},
		{3 << 40, 0, ""},
	} {
		if got := humanSizeBrief(c.bytes, c.prefix); got != c.want {
			t.Errorf("humanSizeBrief(%d, %d) = %q, want %q", c.bytes, c.prefix, got, c.want)
		}
	}
}

func TestHumanChunksize(t *testing.T) {
	for _, c := range []struct {
		bytes uint64
		want  string
	}{
		{0, "0 B"}, {512, "512 B"}, {1023, "1023 B"}, {1024, "1 KB"}, {1536, "1 KB"},
		{64 << 20, "64 MB"}, {4 << 20, "4 MB"}, {1 << 30, "1 GB"}, {1 << 40, "1 TB"},
		{1 << 50, "1 PB"},
	} {
		if got := humanChunksize(c.bytes); got != c.want {
			t.Errorf("humanChunksize(%d) = %q, want %q", c.bytes, got, c.want)
		}
	}
}

func TestCtime24(t *testing.T) {
	old := time.Local
	defer func() { time.Local = old }()
	time.Local = time.UTC
	for _, c := range []struct {
		sec  int64
		want string
	}{
		{0, "Thu Jan  1 00:00:00 1970"},
		{1660669321, "Tue Aug 16 17:02:01 2022"},
		{1796017299, "Mon Nov 30 05:41:39 2026"},
		{253402300800, "Sat Jan  1 00:00:00 1000"}, // year 10000, cut at 24 characters
		{1<<40 - 1, "Mon Feb 20 00:36:15 3681"},    // largest 40-bit value (year 36812, cut)
	} {
		if got := ctime24(c.sec); got != c.want {
			t.Errorf("ctime24(%d) = %q, want %q", c.sec, got, c.want)
		}
	}
	time.Local = time.FixedZone("X", 3600)
	if got := ctime24(0); got != "Thu Jan  1 01:00:00 1970" {
		t.Errorf("ctime24 ignores the local zone: %q", got)
	}
}

func TestUUIDText(t *testing.T) {
	u := [16]byte{0x68, 0x65, 0xed, 0xe1, 0xf1, 0xa7, 0x6b, 0x48, 0x45, 0x07, 0x1d, 0x66, 0xa5, 0x57, 0x55, 0xbd}
	if got := uuidText(u, ':'); got != "6865ede1:f1a76b48:45071d66:a55755bd" {
		t.Errorf("uuidText = %q", got)
	}
	if got := fnameFromUUID(u, '-'); got != "UUID-6865ede1-f1a76b48-45071d66-a55755bd" {
		t.Errorf("fnameFromUUID = %q", got)
	}
	if got := rfc4122UUID(u); got != "6865ede1-f1a7-6b48-4507-1d66a55755bd" {
		t.Errorf("rfc4122UUID = %q", got)
	}
	if got := uuidWordsText([4]uint32{0x60a2c308, 0x7439bc01, 1, 0xd4abbcc7}, ':'); got != "60a2c308:7439bc01:00000001:d4abbcc7" {
		t.Errorf("uuidWordsText = %q", got)
	}
}

func TestLevelAndLayoutNames(t *testing.T) {
	for _, c := range []struct {
		level int
		want  string
	}{{-1, "linear"}, {0, "raid0"}, {1, "raid1"}, {4, "raid4"}, {5, "raid5"}, {6, "raid6"},
		{10, "raid10"}, {-4, "multipath"}, {-5, "faulty"}, {-100, "container"}, {7, "-unknown-"}} {
		if got := levelName(c.level); got != c.want {
			t.Errorf("levelName(%d) = %q, want %q", c.level, got, c.want)
		}
	}
	if got := levelNameOrNull(3); got != "(null)" {
		t.Errorf("levelNameOrNull(3) = %q", got)
	}
	for _, c := range []struct {
		level  int
		layout uint32
		r0     bool
		want   string
		ok     bool
	}{
		{5, 2, false, "left-symmetric", true},
		{5, 4, false, "parity-first", true},
		{5, 8, false, "-unknown-", true},
		{6, 9, false, "ddf-N-restart", true},
		{6, 20, false, "parity-first-6", true},
		{0, 1, false, "", false},
		{0, 1, true, "original", true},
		{0, 2, true, "alternate", true},
		{0, 0, true, "dangerous", true},
		{0, 3, true, "-unknown-", true},
		{1, 0, false, "", false},
		{10, 0x102, false, " near=2", true},
	} {
		got, ok := layoutName(c.level, c.layout, c.r0)
		if got != c.want || ok != c.ok {
			t.Errorf("layoutName(%d, %#x, %v) = %q, %v; want %q, %v", c.level, c.layout, c.r0, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		layout      uint32
		text, short string
	}{
		{0x102, " near=2", "n2"},
		{0x201, " far=2", "f2"},
		{0x10201, " offset=2", "o2"},
		{0x103, " near=3", "n3"},
		{0x202, " near=2, far=2", " near=2, far=2"},
		{0x101, "NO REDUNDANCY", "n1"},
	} {
		if got := r10LayoutText(c.layout); got != c.text {
			t.Errorf("r10LayoutText(%#x) = %q, want %q", c.layout, got, c.text)
		}
		if got := r10LayoutShort(c.layout); got != c.short {
			t.Errorf("r10LayoutShort(%#x) = %q, want %q", c.layout, got, c.short)
		}
	}
}

func TestPrintQuotedEscape(t *testing.T) {
	for _, c := range []struct{ in, quoted, escaped string }{
		{"mdvm:0", "mdvm:0", "mdvm:0"},
		{"a b", `"a b"`, "a_b"},
		{"a\tb", "\"a\tb\"", "a_b"},
		// printEscape: mdadm keeps quotes (my_"big"_one), which turn the
		// rest of an ARRAY line into the device name; mdtool maps them
		// and every control byte to '_' as well.
		{`my "big" one`, `'my "big" one'`, `my__big__one`},
		{`it's mine`, `"it's mine"`, "it_s_mine"},
		{`x"y'z w`, `'x"y'"'z w"`, `x_y_z_w`}, // quoted: checked against mdadm's print_quoted built with gcc
		{"a/b", "a/b", "a-b"},
		{"x\nPROGRAM /e.sh", `"x` + "\n" + `PROGRAM /e.sh"`, "x_PROGRAM_-e.sh"},
		{"\x1b[31m\x00\xff", "\x1b[31m\x00\xff", "_[31m__"},
		{"a#b=c", "a#b=c", "a#b=c"},
		{"", "", ""},
	} {
		if got := printQuoted(c.in); got != c.quoted {
			t.Errorf("printQuoted(%q) = %q, want %q", c.in, got, c.quoted)
		}
		if got := printEscape(c.in); got != c.escaped {
			t.Errorf("printEscape(%q) = %q, want %q", c.in, got, c.escaped)
		}
	}
}

func TestStrerror(t *testing.T) {
	_, err := os.Open("/nonexistent/x")
	if got := strerror(err); got != "No such file or directory" {
		t.Errorf("strerror(ENOENT) = %q", got)
	}
	if got := strerror(&fs.PathError{Op: "open", Path: "x", Err: fs.ErrPermission}); got != "Permission denied" {
		t.Errorf("strerror(EPERM) = %q", got)
	}
	if got := strerror(errors.New("")); got != "" {
		t.Errorf("strerror(empty) = %q", got)
	}
}

func TestCString(t *testing.T) {
	if got := string(cString([]byte("ab\x00cd"))); got != "ab" {
		t.Errorf("cString = %q", got)
	}
	if got := string(cString([]byte("abcd"))); got != "abcd" {
		t.Errorf("cString = %q", got)
	}
}

func TestExportValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"host:data", "host:data"},
		{"md_d0", "md_d0"},
		{"a b", "'a b'"},
		{"x\nPROGRAM /e.sh", `'x\nPROGRAM /e.sh'`},
		{"$(reboot)", "'$(reboot)'"},
		{"it's", `'it\x27s'`},
		{"\x1b[31m", `'\x1b[31m'`},
		{`a\b`, `'a\\b'`},
	} {
		got := exportValue(c.in)
		if got != c.want {
			t.Errorf("exportValue(%q) = %q, want %q", c.in, got, c.want)
		}
		// What a shell makes of it: exactly the escaped name, one word.
		out, err := exec.Command("/bin/sh", "-c", "V="+got+"; printf %s \"$V\"").Output()
		want := strings.ReplaceAll(escName(c.in), "'", `\x27`)
		if err != nil || string(out) != want {
			t.Errorf("sh reads V=%s as %q (%v), want %q", got, out, err, want)
		}
	}
}
