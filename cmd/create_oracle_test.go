package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireHostMdadm fails under CI and skips elsewhere when mdadm 4.2 is
// not installed on the host.
func requireHostMdadm(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mdadm")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("host mdadm is required in CI")
		}
		t.Skip("host mdadm not installed")
	}
	return p
}

// TestCreatedMembersMatchHostMdadm creates arrays with mdtool and checks,
// for every member, that host mdadm 4.2 --examine finds a correct checksum
// and prints exactly the text mdtool examine prints (the first line names
// the device and is compared separately).
func TestCreatedMembersMatchHostMdadm(t *testing.T) {
	mdadm := requireHostMdadm(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range createCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			for i, mib := range c.disks {
				if mib == 0 {
					paths = append(paths, "missing")
					continue
				}
				paths = append(paths, sparse(t, dir, "d"+string(rune('0'+i))+".img", mib<<20))
			}
			env, _, errb := testEnv("")
			env.Hostname = os.Hostname // host mdadm says "local to host" for its own name
			args := append([]string{"--create", "/dev/md/" + c.name, "--run", "--homehost=" + host}, c.args...)
			if rc := Main(append(args, paths...), env); rc != 0 {
				t.Fatalf("create: exit %d: %s", rc, errb)
			}
			for _, p := range paths {
				if p == "missing" {
					continue
				}
				env, out, errb := testEnv("")
				env.Hostname = os.Hostname
				if rc := Main([]string{"--examine", p}, env); rc != 0 {
					t.Fatalf("mdtool -E %s: exit %d: %s", p, rc, errb)
				}
				cmd := exec.Command(mdadm, "--examine", p)
				cmd.Env = append(os.Environ(), "TZ=UTC")
				want, err := cmd.Output()
				if err != nil {
					t.Fatalf("mdadm --examine %s: %v", p, err)
				}
				if !strings.Contains(string(want), " - correct") {
					t.Errorf("host mdadm: checksum not correct on %s:\n%s", filepath.Base(p), want)
				}
				if string(want) != out.String() {
					t.Errorf("%s: mdtool examine differs from mdadm --examine\n--- mdadm\n%s--- mdtool\n%s", filepath.Base(p), want, out.String())
				}
			}
		})
	}
}
