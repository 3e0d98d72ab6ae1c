package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/internal/testkit/faults"
	"mdtool/internal/testkit/geometry"
)

// testHooksTag is the build tag of the test build of mdtool
// (testhooks_env.go).
const testHooksTag = "mdtool_testhooks"

// testSeams are what only the test build may contain: the variables it
// reads and the test-support packages that read them.
var testSeams = []string{faults.Env, geometry.Env, "MDTOOL_TEST_", "mdtool/internal/testkit"}

// TestProductionBuildHasNoTestSeams builds mdtool as the product is built
// (go build, no tags) and finds none of testSeams in the binary, while
// the test build holds every one of them (so that the search finds what
// it looks for). Then both binaries run create with a size override on
// their members: only the test build applies it.
func TestProductionBuildHasNoTestSeams(t *testing.T) {
	test := mdtoolBinary(t)
	prod := filepath.Join(t.TempDir(), "mdtool")
	if out, err := exec.Command("go", "build", "-o", prod, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range []struct {
		bin  string
		want bool
	}{{prod, false}, {test, true}} {
		b, err := os.ReadFile(c.bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range testSeams {
			if bytes.Contains(b, []byte(s)) != c.want {
				t.Errorf("%s: contains %q: %v, want %v", c.bin, s, !c.want, c.want)
			}
		}
	}

	dir := t.TempDir()
	availSize := func(bin, name string) string {
		t.Helper()
		a := sparse(t, dir, name+"-a.img", 64<<20)
		b := sparse(t, dir, name+"-b.img", 64<<20)
		run := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), geometry.Env+"="+a+":size=33554432;"+b+":size=33554432")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
			}
			return string(out)
		}
		run("create", "/dev/md/"+name, "--run", "--homehost=testhost", "-l1", "-n2", "--assume-clean", a, b)
		return examineField(run("examine", a), "Avail Dev Size")
	}
	got, want := availSize(test, "hooked"), availSize(prod, "plain")
	if !strings.HasPrefix(got, "63488 ") || !strings.HasPrefix(want, "129024 ") {
		t.Errorf("Avail Dev Size with a 32 MiB size override on 64 MiB members: test build %q (want 63488 sectors), product %q (want 129024, no override)", got, want)
	}
}

// TestTestBuildEnv: the test build refuses a malformed
// MDTOOL_GEOMETRY_OVERRIDE at start, and a bad MDTOOL_TEST_FAULTS stops
// assemble, each naming its variable.
func TestTestBuildEnv(t *testing.T) {
	bin := mdtoolBinary(t)
	run := func(env string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(geometry.Env+"=junk", "--version"); code != 2 || !strings.Contains(out, "mdtool: "+geometry.Env+`: entry "junk"`) {
		t.Errorf("%s=junk: exit %d\n%s", geometry.Env, code, out)
	}
	dir := t.TempDir()
	devs := mkArray(t, dir, "/dev/md/envflt", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	code, out := run(faults.Env+"="+devs[1]+":write=0.5,bogus=1", "assemble", "--foreground", "--run-dir", dir, "/dev/md/envflt", devs[0], devs[1])
	if code != 1 || !strings.Contains(out, "mdtool: "+faults.Env+": entry 1 ("+devs[1]+`): unknown fault "bogus"`) {
		t.Errorf("%s with a bad spec: exit %d\n%s", faults.Env, code, out)
	}
}
