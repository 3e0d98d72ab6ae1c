package cmd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestTranslateMdadmArgs(t *testing.T) {
	cases := []struct{ in, want string }{
		{"--create /dev/md0 -l10 -n4 --bitmap=internal --bitmap-chunk=64M a b c d",
			"create /dev/md0 -l10 -n4 --bitmap=internal --bitmap-chunk=64M a b c d"},
		{"-C /dev/md0 --level=5 -n3 a b c", "create /dev/md0 --level=5 -n3 a b c"},
		{"/dev/md0 --create -l1 -n2 a b", "create /dev/md0 -l1 -n2 a b"},
		{"-E /dev/sda", "examine /dev/sda"},
		{"-Es", "examine -s"},
		{"-Ebsv", "examine -bsv"},
		{"--examine --scan", "examine --scan"},
		{"--examine --brief --scan --config=/etc/mdadm.conf", "examine --brief --scan --config=/etc/mdadm.conf"},
		{"-X /dev/sda", "examine-bitmap /dev/sda"},
		{"--examine-bitmap /dev/sda", "examine-bitmap /dev/sda"},
		{"--zero-superblock /dev/sda /dev/sdb", "zero-superblock /dev/sda /dev/sdb"},
		{"--misc --zero-superblock /dev/sda", "zero-superblock /dev/sda"},
		{"-D /dev/md0", "detail /dev/md0"},
		{"--detail --scan", "detail --scan"},
		{"-A /dev/md0 a b", "assemble /dev/md0 a b"},
		{"-S /dev/md0", "stop /dev/md0"},
		{"/dev/md/data --fail /dev/loop1", "manage /dev/md/data --fail /dev/loop1"},
		{"/dev/md0 -f /dev/loop1 -r /dev/loop1", "manage /dev/md0 -f /dev/loop1 --remove"}, // 4.2: -r takes a value
		{"/dev/md0 -f /dev/loop1 --remove /dev/loop1", "manage /dev/md0 -f /dev/loop1 --remove /dev/loop1"},
		{"/dev/md/x --add /dev/loop3", "manage /dev/md/x --add /dev/loop3"},
		{"/dev/md0 --replace /dev/loop1 --with /dev/loop4", "manage /dev/md0 --replace /dev/loop1 --with /dev/loop4"},
		{"--action=check /dev/md0", "action --action=check /dev/md0"},
		{"--misc --action=idle /dev/md0 /dev/md1", "action --action=idle /dev/md0 /dev/md1"},
		{"--action check /dev/md0", "action --action check /dev/md0"},
		{"--monitor --scan --oneshot", "monitor --scan --oneshot"},
		{"-F --program /bin/true --delay 5 /dev/md0", "monitor --program /bin/true --delay 5 /dev/md0"},
		{"--wait /dev/md0", "wait /dev/md0"},
		{"-W /dev/md0 /dev/md1", "wait /dev/md0 /dev/md1"},
		{"/dev/md0 --add -W /dev/sdb", "manage /dev/md0 --add -W /dev/sdb"},
		// a value that looks like a mode letter is not a mode
		{"--create /dev/md0 -N -E a", "create /dev/md0 -N -E a"},
		{"--create /dev/md0 --name -X a", "create /dev/md0 --name -X a"},
		{"-V", "--version"},
		{"create /dev/md0 -l1", "create /dev/md0 -l1"},
		{"examine a", "examine a"},
		{"--", "--"},
	}
	env, _, _ := testEnv("")
	root := NewRoot(env)
	for _, c := range cases {
		got := strings.Join(translateMdadmArgs(root, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("translate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExpandLongPrefixes(t *testing.T) {
	env, _, _ := testEnv("")
	root := NewRoot(env)
	got := expandLongPrefixes(root, strings.Fields("create /dev/md0 --lev=5 --raid-dev=3 --assume a b c --bitmap-c=64M --b=internal"))
	want := strings.Fields("create /dev/md0 --level=5 --raid-devices=3 --assume-clean a b c --bitmap-chunk=64M --b=internal")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expandLongPrefixes:\n got %q\nwant %q", got, want)
	}
}

// TestMdadmFormExitCodes runs the mdadm command-line form end to end.
func TestMdadmFormExitCodes(t *testing.T) {
	dir := t.TempDir()
	a, b := sparse(t, dir, "a", 24<<20), sparse(t, dir, "b", 24<<20)
	env, _, errb := testEnv("")
	if rc := Main([]string{"--create", "/dev/md/t", "--lev=1", "--raid-dev=2", "--run", a, b}, env); rc != 0 {
		t.Fatalf("create with abbreviated options: exit %d: %s", rc, errb)
	}
	env, out, _ := testEnv("")
	if rc := Main([]string{"-Es", "--config=none", a, b}, env); rc != 0 || !strings.HasPrefix(out.String(), "ARRAY /dev/md/t ") {
		t.Errorf("-Es: exit %d, output %q", rc, out)
	}
	env, _, errb = testEnv("")
	if rc := Main([]string{"--create", "/dev/md0", "--no-such-option", a}, env); rc != 2 {
		t.Errorf("unknown option: exit %d, want 2 (%s)", rc, errb)
	}
	env, _, _ = testEnv("")
	if rc := Main([]string{"-E", sparse(t, dir, "empty", 24<<20)}, env); rc != 1 {
		t.Errorf("-E on a device without superblock: exit %d, want 1", rc)
	}
}

// TestArgTableMatchesCobra checks every flag of every command: the mdadm
// form treats the word after an option as its value exactly when cobra
// will (the flag has no NoOptDefVal). The probe value is -V: taken for a
// value it stays "-V", taken for an option it becomes --version.
func TestArgTableMatchesCobra(t *testing.T) {
	env, _, _ := testEnv("")
	root := NewRoot(env)
	modeOpt := map[string]string{}
	for opt, sub := range longModes {
		if cur, ok := modeOpt[sub]; !ok || opt < cur {
			modeOpt[sub] = opt
		}
	}
	modeOpt["action"] = "--action=check"
	translate := func(args ...string) string {
		return strings.Join(translateMdadmArgs(root, args), " ")
	}
	checked, withArg := 0, 0
	anyTakes := map[string]map[bool]bool{}
	for _, c := range root.Commands() {
		opt, ok := modeOpt[c.Name()]
		if !ok {
			continue
		}
		check := func(f *pflag.Flag) {
			if f.Name == "help" || f.Name == "version" {
				return
			}
			takes := f.NoOptDefVal == ""
			if anyTakes[f.Name] == nil {
				anyTakes[f.Name] = map[bool]bool{}
			}
			anyTakes[f.Name][takes] = true
			forms := []string{"--" + f.Name}
			if f.Shorthand != "" {
				forms = append(forms, "-"+f.Shorthand)
			}
			for _, form := range forms {
				got := translate(opt, "/dev/md0", form, "-V")
				if c.Name() == "manage" && form == "-r" {
					// mdadm 4.2's short -r takes a value and drops it
					// (cmd/mdadm_remove42.go): "-V" is swallowed.
					if got != "manage /dev/md0 --remove" {
						t.Errorf("manage -r -V: translated to %q, want mdadm 4.2's \"manage /dev/md0 --remove\"", got)
					}
					checked++
					continue
				}
				wantTail := " " + form + " -V"
				if !takes {
					wantTail = " " + form + " --version"
				}
				if !strings.HasSuffix(got, wantTail) {
					t.Errorf("%s %s (takes a value: %v): translated to %q, want it to end in %q", c.Name(), form, takes, got, wantTail)
				}
				checked++
				if takes {
					withArg++
				}
			}
		}
		c.LocalFlags().VisitAll(check)
		c.InheritedFlags().VisitAll(check)
	}
	// Before a mode is known: a long option's value is not a mode option
	// (--name -E is a name), when the option takes a value in every
	// command that has it.
	for name, takes := range anyTakes {
		if name == "action" || manageOpts["--"+name] || roModes["--"+name] != "" {
			continue // --action is a mode itself, --fail ... set manage mode, --readonly misc mode
		}
		got := translate("--"+name, "-E", "x")
		if takes[true] && !takes[false] && got != "--"+name+" -E x" {
			t.Errorf("--%s -E x (mode-less, takes a value): translated to %q", name, got)
		}
		if takes[false] && !takes[true] && got != "examine --"+name+" x" {
			t.Errorf("--%s -E x (mode-less, no value): translated to %q", name, got)
		}
	}
	if checked < 100 || withArg < 40 {
		t.Errorf("only %d option forms checked (%d with a value): is the tree walked?", checked, withArg)
	}
	t.Logf("%d option forms checked, %d take a value", checked, withArg)
}
