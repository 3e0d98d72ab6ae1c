package cmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func TestMain(m *testing.M) {
	// The fixtures were captured in a VM running in UTC; mdadm prints
	// local times.
	time.Local = time.UTC
	flag.Parse()
	// Keep a developer's mdtool.yaml out of the tests.
	dir, err := os.MkdirTemp("", "mdtool-cmd-test")
	if err != nil {
		panic(err)
	}
	empty := filepath.Join(dir, "mdtool.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		panic(err)
	}
	os.Setenv("MDTOOL_CONFIG", empty)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// vmHost is the host name of the VM the fixtures were made in.
const vmHost = "mdvm"

type runResult struct {
	stdout, stderr string
	code           int
}

// runMdtool runs mdtool's real entry point with args.
func runMdtool(t *testing.T, hostname string, args ...string) runResult {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{
		Stdin:    strings.NewReader(""),
		Stdout:   &out,
		Stderr:   &errb,
		Now:      func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		Hostname: func() (string, error) { return hostname, nil },
	}
	code := Main(args, env)
	return runResult{out.String(), errb.String(), code}
}

// emptyConf returns the path of an empty mdadm.conf, so that the tests do
// not read the machine's.
func emptyConf(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mdadm.conf")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fxCase is a fixture case materialized into a temporary directory.
type fxCase struct {
	c     *fixture.Case
	paths []string // image paths, in member order
}

func loadCases(t *testing.T) []*fxCase {
	t.Helper()
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixture.LoadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no fixture cases under", dir)
	}
	var out []*fxCase
	for _, c := range cases {
		tmp := t.TempDir()
		paths, err := c.Materialize(tmp)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		out = append(out, &fxCase{c, paths})
	}
	return out
}

// readCaseFile reads a capture of the case.
func readCaseFile(t *testing.T, c *fixture.Case, name string) string {
	t.Helper()
	b, err := c.ReadFile(name)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return string(b)
}

// diffText returns a short line diff of want and got ("" if equal).
func diffText(want, got string) string {
	if want == got {
		return ""
	}
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	var b strings.Builder
	n := len(w)
	if len(g) > n {
		n = len(g)
	}
	for i := 0; i < n; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			fmt.Fprintf(&b, "line %d:\n  mdadm:  %q\n  mdtool: %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// TestExamineMatchesMdadm compares "mdtool examine IMAGE" with what mdadm
// 4.2 printed for the same member in the VM (--examine, --export), and the
// ARRAY lines of --brief over all members.
func TestExamineMatchesMdadm(t *testing.T) {
	conf := emptyConf(t)
	for _, fc := range loadCases(t) {
		c := fc.c
		for i, m := range c.Members {
			path := fc.paths[i]
			t.Run(c.Name+"/"+m.Name+"/examine", func(t *testing.T) {
				r := runMdtool(t, vmHost, "examine", "--config", conf, path)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				got := strings.Replace(r.stdout, path+":\n", m.Dev+":\n", 1)
				if d := diffText(readCaseFile(t, c, m.Examine), got); d != "" {
					t.Errorf("examine differs from mdadm's:\n%s", d)
				}
			})
			t.Run(c.Name+"/"+m.Name+"/export", func(t *testing.T) {
				r := runMdtool(t, vmHost, "examine", "--export", "--config", conf, path)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				if d := diffText(readCaseFile(t, c, m.Export), r.stdout); d != "" {
					t.Errorf("export differs from mdadm's:\n%s", d)
				}
			})
			if m.ExamineBitmap != "" {
				t.Run(c.Name+"/"+m.Name+"/examine-bitmap", func(t *testing.T) {
					r := runMdtool(t, vmHost, "examine-bitmap", path)
					if r.code != 0 || r.stderr != "" {
						t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
					}
					got := strings.Replace(r.stdout, "Filename : "+path+"\n", "Filename : "+m.Dev+"\n", 1)
					if d := diffText(readCaseFile(t, c, m.ExamineBitmap), got); d != "" {
						t.Errorf("examine-bitmap differs from mdadm's:\n%s", d)
					}
				})
			}
		}
		if c.Outputs.Brief != "" {
			t.Run(c.Name+"/brief", func(t *testing.T) {
				args := append([]string{"examine", "--brief", "--config", conf}, fc.paths...)
				r := runMdtool(t, vmHost, args...)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				if d := diffText(readCaseFile(t, c, c.Outputs.Brief), r.stdout); d != "" {
					t.Errorf("brief differs from mdadm's:\n%s", d)
				}
			})
		}
	}
}

// TestExamineMatchesHostMdadm compares with mdadm 4.2 run on the host on
// the image files ("mdadm --examine vdX.img", host name not mdvm).
func TestExamineMatchesHostMdadm(t *testing.T) {
	conf := emptyConf(t)
	for _, fc := range loadCases(t) {
		c := fc.c
		for i, m := range c.Members {
			if m.HostExamine == "" {
				continue
			}
			path := fc.paths[i]
			t.Run(c.Name+"/"+m.Name, func(t *testing.T) {
				r := runMdtool(t, "fixture-host", "examine", "--config", conf, path)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				got := strings.Replace(r.stdout, path+":\n", m.Image+":\n", 1)
				if d := diffText(readCaseFile(t, c, m.HostExamine), got); d != "" {
					t.Errorf("examine differs from host mdadm's:\n%s", d)
				}
			})
		}
	}
}
