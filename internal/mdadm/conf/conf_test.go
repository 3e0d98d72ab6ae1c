package conf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func parseConf(t *testing.T, text string) *Conf {
	t.Helper()
	c := &Conf{}
	c.Parse("test.conf", strings.NewReader(text))
	return c
}

func TestConfLines(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     [][]string
	}{
		{"simple", "DEVICE /dev/sda /dev/sdb\n", [][]string{{"DEVICE", "/dev/sda", "/dev/sdb"}}},
		{"continuation", "ARRAY /dev/md0\n   uuid=1\n\tname=x\nMAILADDR root\n",
			[][]string{{"ARRAY", "/dev/md0", "uuid=1", "name=x"}, {"MAILADDR", "root"}}},
		{"comments", "# header\nDEVICE a # trailing\n# inside\n  b\n\n  c\nPROGRAM p\n",
			[][]string{{"DEVICE", "a", "b", "c"}, {"PROGRAM", "p"}}},
		{"hash inside word", "ARRAY x#y\n", [][]string{{"ARRAY", "x#y"}}},
		{"quotes", "ARRAY name=\"my array\" 'a b'c\n", [][]string{{"ARRAY", "name=my array", "a bc"}}},
		{"empty quotes", "ARRAY \"\" x\n", [][]string{{"ARRAY", "", "x"}}},
		{"quote stops at newline", "ARRAY \"a b\nDEVICE c\n", [][]string{{"ARRAY", "a b"}, {"DEVICE", "c"}}},
		{"no final newline", "HOMEHOST h", [][]string{{"HOMEHOST", "h"}}},
		{"leading blank line continues nothing", "\n  \nDEVICE x\n", [][]string{{"DEVICE", "x"}}},
		{"leading indented word", "  DEVICE x\n", [][]string{{"DEVICE", "x"}}},
		{"active hack", "ARRAY active(auto-read-only)\n", [][]string{{"ARRAY", "active", "(auto-read-only)"}}},
		{"empty", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [][]string
			for _, l := range splitConfLines(strings.NewReader(c.in)) {
				got = append(got, l.words)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestConfLineNumbers(t *testing.T) {
	lines := splitConfLines(strings.NewReader("# c\n\nARRAY a\n  uuid=x\nARRAY b\n"))
	if len(lines) != 2 || lines[0].line != 3 || lines[1].line != 5 {
		t.Errorf("lines %+v", lines)
	}
}

func TestConfKeywords(t *testing.T) {
	for _, c := range []struct{ word, want string }{
		{"DEVICE", "devices"}, {"dev", "devices"}, {"DEVICES", "devices"}, {"devicesx", ""},
		{"de", ""}, {"ARR", "array"}, {"array", "array"}, {"MAIL", "mailaddr"}, {"mailf", "mailfrom"},
		{"HOM", "homehost"}, {"homec", "homecluster"}, {"AUT", "auto"}, {"POL", "policy"},
		{"part", "part-policy"}, {"SYS", "sysfs"}, {"mon", "monitordelay"}, {"pro", "program"},
		{"CRE", "create"}, {"xyz", ""},
	} {
		if got := matchConfKeyword(c.word); got != c.want {
			t.Errorf("matchConfKeyword(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestConfParse(t *testing.T) {
	c := parseConf(t, `DEVICE /dev/sd[bcdjkl]1 partitions
dev containers bogus
ARRAY /dev/md0 UUID=3aaa0122:29827cfa:5331ad66:ca767371
ARRAY /dev/md4 uuid=b23f3c6d:aec43a9f:fd65db85:369432df
           spare-group=group1 level=raid5 num-devices=4 spares=1 metadata=1.2
ARRAY /dev/md/home name=host:home devices=/dev/sda1,/dev/sdb1 bitmap=/x auto=md super-minor=3
ARRAY <ignore> uuid=00000000000000000000000000000001
ARRAY /dev/md5
ARRAY /tmp/bad uuid=1234 metadata=2.0 frob=1 level=raid9
ARRAY container=x member=0
MAILADDR root@mydomain.tld other
MAILFROM md monitor
MAILFROM daemon
PROGRAM /usr/sbin/handle-mdadm-events
CREATE group=system mode=0640 auto=part-8 owner=root metadata=1.0 names=yes bbl=no symlinks=no
CREATE mode=99 frob
HOMEHOST <ignore> first second
HOMECLUSTER <none>
AUTO +1.x homehost -all
AUTO ignored
SYSFS name=/dev/md/raid5 group_thread_cnt=4
POLICY domain=x action=spare
PART-POLICY type=gpt
MONITORDELAY 60
FROBNICATE now
`)
	if want := []string{"/dev/sd[bcdjkl]1", "partitions", "containers"}; !reflect.DeepEqual(c.Devices, want) {
		t.Errorf("Devices = %q", c.Devices)
	}
	if len(c.Arrays) != 5 {
		t.Fatalf("%d arrays: %+v", len(c.Arrays), c.Arrays)
	}
	a := c.Arrays[1]
	if a.Device != "/dev/md4" || !a.UUIDSet || a.UUID != [16]byte{0xb2, 0x3f, 0x3c, 0x6d, 0xae, 0xc4, 0x3a, 0x9f, 0xfd, 0x65, 0xdb, 0x85, 0x36, 0x94, 0x32, 0xdf} ||
		a.SpareGroup != "group1" || a.Level != 5 || a.RaidDisks != 4 || a.Spares != 1 || a.Metadata != "1.2" || a.Line != 4 {
		t.Errorf("array 1: %+v", a)
	}
	a = c.Arrays[2]
	if a.Name != "host:home" || a.Devices != "/dev/sda1,/dev/sdb1" || a.Bitmap != "/x" || a.Auto != "md" || a.SuperMinor != 3 || a.UUIDSet {
		t.Errorf("array 2: %+v", a)
	}
	if c.Arrays[3].Device != "<ignore>" || c.Arrays[4].Container != "x" || c.Arrays[4].Member != "0" {
		t.Errorf("arrays 3, 4: %+v %+v", c.Arrays[3], c.Arrays[4])
	}
	if c.MailAddr != "root@mydomain.tld" || c.MailFrom != "md monitor daemon" || c.Program != "/usr/sbin/handle-mdadm-events" {
		t.Errorf("mail/program: %q %q %q", c.MailAddr, c.MailFrom, c.Program)
	}
	cr := c.Create
	if cr.Group != "system" || cr.Owner != "root" || cr.Auto != "part-8" || cr.Metadata != "1.0" ||
		cr.Names != "yes" || cr.BBL != "no" || cr.Symlinks != "no" || !cr.ModeSet || cr.Mode != 0600 {
		t.Errorf("create: %+v", cr)
	}
	if !c.IgnoreHomeHost || !c.HomeHostSet || c.HomeHost != "first" {
		t.Errorf("homehost: %v %v %q", c.IgnoreHomeHost, c.HomeHostSet, c.HomeHost)
	}
	if !c.HomeClusterSet || c.HomeCluster != "" {
		t.Errorf("homecluster: %v %q", c.HomeClusterSet, c.HomeCluster)
	}
	if !reflect.DeepEqual(c.Auto, []string{"+1.x", "homehost", "-all"}) {
		t.Errorf("auto: %q", c.Auto)
	}
	if len(c.Sysfs) != 1 || len(c.Policies) != 1 || len(c.PartPolicies) != 1 || c.MonitorDelay != 60 {
		t.Errorf("sysfs/policy/monitordelay: %q %q %q %d", c.Sysfs, c.Policies, c.PartPolicies, c.MonitorDelay)
	}
	wantWarnings := []Warning{
		{Kind: DeviceLineWord, Word: "bogus"},
		{Kind: ArrayNoIdentity, Word: "/dev/md5"},
		{Kind: ArrayInvalidName, Word: "/tmp/bad"},
		{Kind: ArrayBadUUID, Word: "uuid=1234"},
		{Kind: ArrayMetadataUnknown, Word: "2.0"},
		{Kind: ArrayWord, Word: "frob=1"},
		{Kind: ArrayNoIdentity, Word: "(null)"},
		{Kind: CreateBadMode, Word: "99"},
		{Kind: CreateWord, Word: "frob"},
		{Kind: UnknownKeyword, Word: "FROBNICATE"},
	}
	if !reflect.DeepEqual(c.Warnings, wantWarnings) {
		t.Errorf("warnings:\n%+v\nwant:\n%+v", c.Warnings, wantWarnings)
	}
}

func TestConfArrayRules(t *testing.T) {
	c := parseConf(t, `ARRAY /dev/md0 /dev/md1 uuid=01234567:89abcdef:01234567:89abcdef uuid=1
ARRAY md_d2 super-minor=x name=123456789012345678901234567890123 name=a name=b
ARRAY /dev/md_d3 super-minor=-1 devices=a devices=b spare-group=x spare-group=y bitmap=1 bitmap=2
`)
	want := []Warning{
		{Kind: ArrayOneDevice, Word: "/dev/md0", Other: "/dev/md1"},
		{Kind: ArrayUUIDTwice, Word: "uuid=1"},
		{Kind: ArrayBadSuperMinor, Word: "super-minor=x"},
		{Kind: ArrayNameTooLong, Word: "name=123456789012345678901234567890123"},
		{Kind: ArrayNameTwice, Word: "name=b"},
		{Kind: ArrayBadSuperMinor, Word: "super-minor=-1"},
		{Kind: ArrayDevicesTwice, Word: "devices=b"},
		{Kind: ArraySpareGroupTwice, Word: "spare-group=y"},
		{Kind: ArrayBitmapTwice, Word: "bitmap=2"},
	}
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Errorf("warnings:\n%+v", c.Warnings)
	}
	if len(c.Arrays) != 3 || c.Arrays[1].Device != "md_d2" || c.Arrays[1].Name != "a" {
		t.Errorf("arrays %+v", c.Arrays)
	}
}

func TestKnownMetadata(t *testing.T) {
	for s, want := range map[string]bool{
		"0.90": true, "00.90": true, "0": true, "0.91": true, "1.0": true, "1.1": true, "1.2": true,
		"01.2": true, "1": true, "default": true, "ddf": true, "imsm": true, "mbr": true, "gpt": true,
		"1.3": false, "2": false, "0.92": false, "x": false,
	} {
		if got := knownMetadata(s); got != want {
			t.Errorf("knownMetadata(%q) = %v", s, got)
		}
	}
}

func TestLoadConf(t *testing.T) {
	dir := t.TempDir()
	var def Paths
	def.File = filepath.Join(dir, "etc-mdadm", "mdadm.conf")
	def.Dir = def.File + ".d"
	def.AltFile = filepath.Join(dir, "mdadm.conf")
	def.AltDir = def.AltFile + ".d"
	LoadMdadmConf := func(path string) (*Conf, error) { return Load(path, def) }
	DefaultMdadmConf, AltMdadmConf, AltMdadmConfDir := def.File, def.AltFile, def.AltDir
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	c, err := LoadMdadmConf("")
	if err != nil || len(c.Files) != 0 || len(c.Devices) != 0 {
		t.Fatalf("no files: %+v %v", c, err)
	}
	write(AltMdadmConf, "DEVICE /alt\n")
	write(filepath.Join(AltMdadmConfDir, "b.conf"), "DEVICE /b\n")
	write(filepath.Join(AltMdadmConfDir, "a.conf"), "DEVICE /a\n")
	write(filepath.Join(AltMdadmConfDir, ".hidden.conf"), "DEVICE /hidden\n")
	write(filepath.Join(AltMdadmConfDir, "c.txt"), "DEVICE /txt\n")
	write(filepath.Join(AltMdadmConfDir, ".conf"), "DEVICE /short\n")
	c, err = LoadMdadmConf("")
	if err != nil || !reflect.DeepEqual(c.Devices, []string{"/alt", "/a", "/b"}) {
		t.Errorf("alternate file: %q %v", c.Devices, err)
	}
	write(DefaultMdadmConf, "DEVICE /default\n")
	c, err = LoadMdadmConf("")
	if err != nil || !reflect.DeepEqual(c.Devices, []string{"/default"}) {
		t.Errorf("default file wins: %q %v", c.Devices, err)
	}
	c, err = LoadMdadmConf(AltMdadmConfDir)
	if err != nil || !reflect.DeepEqual(c.Devices, []string{"/a", "/b"}) {
		t.Errorf("directory: %q %v", c.Devices, err)
	}
	c, err = LoadMdadmConf("partitions")
	if err != nil || !reflect.DeepEqual(c.Devices, []string{"partitions"}) {
		t.Errorf("partitions: %q %v", c.Devices, err)
	}
	c, err = LoadMdadmConf("none")
	if err != nil || len(c.Devices) != 0 || len(c.Files) != 0 {
		t.Errorf("none: %+v %v", c, err)
	}
	c, err = LoadMdadmConf(filepath.Join(dir, "missing.conf"))
	if err != nil || len(c.Files) != 0 {
		t.Errorf("missing file: %+v %v", c, err)
	}
}

func TestDeviceList(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"sda", "sdb", "sdc", "vdb", "vda"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parts := filepath.Join(dir, "partitions")
	if err := os.WriteFile(parts, []byte("major minor  #blocks  name\n\n   8        0   1024 sda\n   8       16   1024 sdb\n 254        0   1024 nosuchdev0\nbogus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldParts, oldMap := ProcPartitions, NameDev
	t.Cleanup(func() { ProcPartitions, NameDev = oldParts, oldMap })
	ProcPartitions = parts
	NameDev = func(major, minor uint32) string {
		if major == 8 {
			return filepath.Join(dir, "sd"+string(rune('a'+minor/16)))
		}
		return ""
	}
	j := func(n string) string { return filepath.Join(dir, n) }
	for _, c := range []struct {
		name    string
		devices []string
		want    []string
	}{
		// mdadm prepends every device it finds: /proc/partitions comes
		// out backwards, glob matches too, and globs go before partitions.
		{"default", nil, []string{"254:0", j("sdb"), j("sda")}},
		{"glob", []string{j("sd*")}, []string{j("sdc"), j("sdb"), j("sda")}},
		{"two globs", []string{j("sd[ab]"), j("vd*")}, []string{j("sdb"), j("sda"), j("vdb"), j("vda")}},
		{"glob and partitions", []string{"partitions", j("vd*")}, []string{j("vdb"), j("vda"), "254:0", j("sdb"), j("sda")}},
		{"containers only", []string{"containers"}, nil},
		{"no match", []string{j("nothing*")}, nil},
		// NBD URIs are members on servers, not patterns ('?' included).
		{"uris", []string{"nbd://h1/x", "nbd+unix:///?socket=/s", j("vd?")}, []string{"nbd://h1/x", "nbd+unix:///?socket=/s", j("vdb"), j("vda")}},
	} {
		got := (&Conf{Devices: c.devices}).DeviceList()
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzMdadmConf checks that any input parses without panicking, that no
// word holds a newline, and that writing the lines back in a canonical
// form and parsing again gives the same lines.
func FuzzMdadmConf(f *testing.F) {
	for _, s := range []string{
		"DEVICE /dev/sd[bcdjkl]1\nARRAY /dev/md0 UUID=3aaa0122:29827cfa:5331ad66:ca767371\n",
		"ARRAY /dev/md4 uuid=b23f3c6d:aec43a9f:fd65db85:369432df\n           spare-group=group1\n",
		"MAILADDR root@mydomain.tld\nPROGRAM /usr/sbin/handle-mdadm-events\nCREATE group=system mode=0640 auto=part-8\nHOMEHOST <system>\nAUTO +1.x homehost -all\n",
		"# comment\n\nARRAY \"a b\" 'c\"d' x#y # z\n  more\n",
		"ARRAY active(auto-read-only)\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines := splitConfLines(strings.NewReader(in))
		var b strings.Builder
		canonical := true
		for _, l := range lines {
			if len(l.words) == 0 {
				t.Fatalf("empty line from %q", in)
			}
			for i, w := range l.words {
				if strings.ContainsRune(w, '\n') {
					t.Fatalf("word %q holds a newline", w)
				}
				if strings.Contains(w, "active") || strings.Contains(w, "auto-read-only)") {
					canonical = false
				}
				if i > 0 {
					b.WriteByte(' ')
				}
				switch {
				case w != "" && !strings.ContainsAny(w, " \t\"'") && !strings.HasPrefix(w, "#"):
					b.WriteString(w)
				case !strings.Contains(w, `"`):
					b.WriteString(`"` + w + `"`)
				case !strings.Contains(w, `'`):
					b.WriteString(`'` + w + `'`)
				default:
					canonical = false
				}
			}
			b.WriteByte('\n')
		}
		c := &Conf{}
		c.Parse("fuzz", strings.NewReader(in)) // must not panic
		if !canonical {
			return
		}
		again := splitConfLines(strings.NewReader(b.String()))
		if len(again) != len(lines) {
			t.Fatalf("%q: %d lines, canonical %q gives %d", in, len(lines), b.String(), len(again))
		}
		for i := range lines {
			if !reflect.DeepEqual(lines[i].words, again[i].words) {
				t.Fatalf("%q: line %d %q, canonical %q gives %q", in, i, lines[i].words, b.String(), again[i].words)
			}
		}
	})
}

func TestMapDevFromDev(t *testing.T) {
	// /dev of the machine: every block device node found must map back
	// to a node with the same numbers.
	names := scanDevNodes(DevDir)
	for k, p := range names {
		ma, mi, ok := devNodeNumbers(p)
		if !ok || ma != k[0] || mi != k[1] {
			t.Errorf("%s: numbers %d:%d, want %d:%d", p, ma, mi, k[0], k[1])
		}
		if got := MapDev(k[0], k[1]); got != p {
			t.Errorf("MapDev(%d, %d) = %q, want %q", k[0], k[1], got, p)
		}
	}
	if got := MapDev(0, 0); got != "" {
		t.Errorf("MapDev(0, 0) = %q", got)
	}
	if got := MapDev(4095, 1048575); got != "" {
		t.Errorf("MapDev(unused numbers) = %q", got)
	}
}

// DEVICE lines may name members on NBD servers by URI.
func TestDeviceLineURIs(t *testing.T) {
	var c Conf
	c.Parse("mdadm.conf", strings.NewReader("DEVICE /dev/sd* nbd://node1/disk0 nbds+unix:///?socket=/run/s&tls-certificates=/etc/x\nDEVICE http://x/y\n"))
	want := []string{"/dev/sd*", "nbd://node1/disk0", "nbds+unix:///?socket=/run/s&tls-certificates=/etc/x"}
	if !reflect.DeepEqual(c.Devices, want) {
		t.Errorf("Devices = %q, want %q", c.Devices, want)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Kind != DeviceLineWord || c.Warnings[0].Word != "http://x/y" {
		t.Errorf("warnings %+v: want one for http://x/y", c.Warnings)
	}
}
