package cmd

import (
	"strings"
	"testing"

	mdconf "mdtool/internal/mdadm/conf"
)

func parseConf(t *testing.T, text string) *MdadmConf {
	t.Helper()
	c := &MdadmConf{}
	c.Parse("test.conf", strings.NewReader(text))
	return c
}

func TestResolveHomeHost(t *testing.T) {
	sys := func() (string, error) { return "sysname", nil }
	conf := func(text string) *MdadmConf { return parseConf(t, text) }
	for _, c := range []struct {
		name  string
		flag  string
		given bool
		conf  *MdadmConf
		want  string
	}{
		{"default", "", false, nil, "sysname"},
		{"flag", "h", true, conf("HOMEHOST c\n"), "h"},
		{"flag none", "<none>", true, nil, ""},
		{"flag empty", "", true, conf("HOMEHOST c\n"), ""},
		{"flag system", "<SYSTEM>", true, nil, "sysname"},
		{"flag ignore skips conf", "<ignore>", true, conf("HOMEHOST c\n"), "sysname"},
		{"conf", "", false, conf("HOMEHOST c\n"), "c"},
		{"conf none", "", false, conf("HOMEHOST <none>\n"), ""},
		{"conf system", "", false, conf("HOMEHOST <system>\n"), "sysname"},
		{"conf ignore and name", "", false, conf("HOMEHOST <ignore> c\n"), "c"},
		{"conf ignore only", "", false, conf("HOMEHOST <ignore>\n"), "sysname"},
	} {
		if got := ResolveHomeHost(c.flag, c.given, c.conf, sys); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestConfWarningText: every mdadm.conf complaint is worded as mdadm
// 4.2's config.c words it, and a conf file's complaints come out in order.
func TestConfWarningText(t *testing.T) {
	for _, c := range []struct {
		w    mdconf.Warning
		want string
	}{
		{mdconf.Warning{Kind: mdconf.UnknownKeyword, Word: "FROBNICATE"}, "Unknown keyword FROBNICATE"},
		{mdconf.Warning{Kind: mdconf.DeviceLineWord, Word: "bogus"}, "unreconised word on DEVICE line: bogus"},
		{mdconf.Warning{Kind: mdconf.ArrayOneDevice, Word: "/dev/md0", Other: "/dev/md1"}, "only give one device per ARRAY line: /dev/md0 and /dev/md1"},
		{mdconf.Warning{Kind: mdconf.ArrayInvalidName, Word: "/tmp/bad"}, "/tmp/bad is an invalid name for an md device - ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayUUIDTwice, Word: "uuid=1"}, "only specify uuid once, uuid=1 ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayBadUUID, Word: "uuid=1234"}, "bad uuid: uuid=1234"},
		{mdconf.Warning{Kind: mdconf.ArraySuperMinorTwice, Word: "super-minor=2"}, "only specify super-minor once, super-minor=2 ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayBadSuperMinor, Word: "super-minor=x"}, "invalid super-minor number: super-minor=x"},
		{mdconf.Warning{Kind: mdconf.ArrayNameTwice, Word: "name=b"}, "only specify name once, name=b ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayNameTooLong, Word: "name=x"}, "name too long, ignoring name=x"},
		{mdconf.Warning{Kind: mdconf.ArrayBitmapTwice, Word: "bitmap=2"}, "only specify bitmap file once. bitmap=2 ignored"},
		{mdconf.Warning{Kind: mdconf.ArrayDevicesTwice, Word: "devices=b"}, "only specify devices once (use a comma separated list). devices=b ignored"},
		{mdconf.Warning{Kind: mdconf.ArraySpareGroupTwice, Word: "spare-group=y"}, "only specify one spare group per array. spare-group=y ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayMetadataUnknown, Word: "2.0"}, "metadata format 2.0 unknown, ignored."},
		{mdconf.Warning{Kind: mdconf.ArrayWord, Word: "frob=1"}, "unrecognised word on ARRAY line: frob=1"},
		{mdconf.Warning{Kind: mdconf.ArrayNoIdentity, Word: "(null)"}, "ARRAY line (null) has no identity information."},
		{mdconf.Warning{Kind: mdconf.CreateMissingOwner}, "missing owner name"},
		{mdconf.Warning{Kind: mdconf.CreateMissingGroup}, "missing group name"},
		{mdconf.Warning{Kind: mdconf.CreateMissingMode}, "missing CREATE mode"},
		{mdconf.Warning{Kind: mdconf.CreateBadMode, Word: "99"}, "unrecognised CREATE mode 99"},
		{mdconf.Warning{Kind: mdconf.CreateMetadataUnknown, Word: "2.0"}, "metadata format 2.0 unknown, ignoring"},
		{mdconf.Warning{Kind: mdconf.CreateWord, Word: "frob"}, "unrecognised word on CREATE line: frob"},
	} {
		if got := confWarningText(c.w); got != c.want {
			t.Errorf("%+v: %q, want %q", c.w, got, c.want)
		}
	}
	conf := &MdadmConf{}
	conf.Parse("t.conf", strings.NewReader("DEVICE bogus\nARRAY /dev/md0 /dev/md1 uuid=1234\nFROB x\n"))
	var got []string
	for _, w := range conf.Warnings {
		got = append(got, confWarningText(w))
	}
	want := []string{"unreconised word on DEVICE line: bogus", "only give one device per ARRAY line: /dev/md0 and /dev/md1",
		"bad uuid: uuid=1234", "ARRAY line /dev/md0 has no identity information.", "Unknown keyword FROB"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
