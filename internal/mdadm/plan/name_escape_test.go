package plan

import (
	"errors"
	"strings"
	"testing"
)

func TestEscapeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"host:data", "host:data"},
		{"a b#c=d\"e'f", "a b#c=d\"e'f"},
		{"vm:x\nPROGRAM /path/evil.sh", `vm:x\nPROGRAM /path/evil.sh`},
		{"a\tb\rc", `a\tb\rc`},
		{"a\x00b", `a\x00b`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"del\x7f", `del\x7f`},
		{`back\slash`, `back\\slash`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{"c1\u009b2J", `c1\xc2\x9b2J`},                   // C1 CSI
		{"bidi\u202egpj.exe", `bidi\xe2\x80\xaegpj.exe`}, // right-to-left override
		{"ünïcødé", "ünïcødé"},
	} {
		got := EscapeName(c.in)
		if got != c.want {
			t.Errorf("EscapeName(%q) = %q, want %q", c.in, got, c.want)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] == 0x7f {
				t.Errorf("EscapeName(%q) = %q holds byte %#x", c.in, got, got[i])
			}
		}
		if back := UnescapeName(got); back != c.in {
			t.Errorf("UnescapeName(%q) = %q, want %q", got, back, c.in)
		}
	}
	// A backslash that starts no escape is kept as it is.
	for in, want := range map[string]string{`a\qb`: `a\qb`, `a\`: `a\`, `a\x4`: `a\x4`, `a\xzz`: `a\xzz`, `a\x41`: "aA"} {
		if got := UnescapeName(in); got != want {
			t.Errorf("UnescapeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEscapeName(f *testing.F) {
	f.Add("vm:x\nPROGRAM /e.sh")
	f.Add("\\x41\xff")
	f.Fuzz(func(t *testing.T, s string) {
		e := EscapeName(s)
		if UnescapeName(e) != s {
			t.Fatalf("round trip of %q via %q", s, e)
		}
		if strings.ContainsAny(e, "\x00\n\r\t\x1b\x7f") {
			t.Fatalf("EscapeName(%q) = %q", s, e)
		}
		if m := MapUnsafe(s, '_'); strings.ContainsAny(m, "\x00\n\r\t\x1b\x7f") {
			t.Fatalf("MapUnsafe(%q) = %q", s, m)
		}
	})
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"data", "host:data", "0", "a-b_c.d", "a=b", "a/b", "ünï"} {
		if err := CheckName("name", ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"x\nPROGRAM", "a\tb", "a\x00b", "\x1b[31m", "a b", "a#b", `a"b`, "a'b", `a\b`, "a\x7f", "\xff", "a\u00a0b", "a\u202eb"} {
		err := CheckName("name", bad)
		if !refusedAs(err, UnsafeName, bad) {
			t.Errorf("CheckName(%q) = %v, want an UnsafeName refusal", bad, err)
		}
	}
}

// Create refuses a bad --name, a bad name taken from the md device and a
// bad homehost before anything is planned.
func TestNewRefusesUnsafeNames(t *testing.T) {
	base := func() Options {
		return Options{
			MDDevice: "/dev/md/data", Level: "1", RaidDevices: 2, SystemHostname: "host",
			Devices: []Device{{Path: "a", Sectors: 100 * mib}, {Path: "b", Sectors: 100 * mib}},
		}
	}
	if _, err := Plan(base()); err != nil {
		t.Fatalf("control case: %v", err)
	}
	for _, tc := range []struct {
		what string
		set  func(*Options)
	}{
		{"--name newline", func(o *Options) { o.Name = "x\nPROGRAM /e.sh" }},
		{"--name tab", func(o *Options) { o.Name = "a\tb" }},
		{"--name NUL", func(o *Options) { o.Name = "a\x00b" }},
		{"--name ESC", func(o *Options) { o.Name = "\x1b[31m" }},
		{"--name space", func(o *Options) { o.Name = "a b" }},
		{"--name hash", func(o *Options) { o.Name = "a#b" }},
		{"--name quote", func(o *Options) { o.Name = `a"b` }},
		{"device newline", func(o *Options) { o.MDDevice = "/dev/md/x\nPROGRAM" }},
		{"device space", func(o *Options) { o.MDDevice = "/dev/md/a b" }},
		{"homehost", func(o *Options) { o.Homehost = "h\nBcc: x" }},
		{"device with --name", func(o *Options) { o.Name = "ok"; o.MDDevice = "/dev/md/x\x1b[2J" }},
	} {
		o := base()
		tc.set(&o)
		_, err := Plan(o)
		var pe *Refusal
		if !errors.As(err, &pe) || (pe.Kind != UnsafeName && pe.Kind != UnsafeMDDevice) {
			t.Errorf("%s: Plan = %v, want an UnsafeName or UnsafeMDDevice refusal", tc.what, err)
		}
	}
}
