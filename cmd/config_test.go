package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPrecedence: flag > MDTOOL_* > "<command>.<flag>" in the file >
// "<flag>" in the file > mdadm's default.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "mdtool.yaml")
	if err := os.WriteFile(conf, []byte("metadata: \"1.1\"\ncreate:\n  bitmap-chunk: 32M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	examine := func(dev string) string {
		env, out, errb := testEnv("")
		if rc := Main([]string{"-E", dev}, env); rc != 0 {
			t.Fatalf("examine: %d %s", rc, errb)
		}
		return out.String()
	}
	bitmapChunk := func(dev string) string {
		env, out, errb := testEnv("")
		if rc := Main([]string{"-X", dev}, env); rc != 0 {
			t.Fatalf("-X: %d %s", rc, errb)
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "Chunksize :") {
				return strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
			}
		}
		return ""
	}
	create := func(extra ...string) string {
		a, b := sparse(t, t.TempDir(), "a", 24<<20), sparse(t, t.TempDir(), "b", 24<<20)
		env, _, errb := testEnv("")
		args := append([]string{"--create", "/dev/md0", "-l1", "-n2", "--run", "-b", "internal"}, extra...)
		if rc := Main(append(args, a, b), env); rc != 0 {
			t.Fatalf("create %v: %d %s", extra, rc, errb)
		}
		return a
	}

	t.Setenv("MDTOOL_CONFIG", conf)
	a := create()
	if !strings.Contains(examine(a), "Version : 1.1") {
		t.Errorf("config file metadata not applied:\n%s", examine(a))
	}
	if c := bitmapChunk(a); c != "32 MB" {
		t.Errorf("create.bitmap-chunk from config: Chunksize %q, want 32 MB", c)
	}

	t.Setenv("MDTOOL_METADATA", "1.0")
	t.Setenv("MDTOOL_BITMAP_CHUNK", "16M")
	a = create()
	if !strings.Contains(examine(a), "Version : 1.0") {
		t.Errorf("MDTOOL_METADATA not applied over the config file")
	}
	if c := bitmapChunk(a); c != "16 MB" {
		t.Errorf("MDTOOL_BITMAP_CHUNK: Chunksize %q, want 16 MB", c)
	}

	a = create("-e", "1.2", "--bitmap-chunk=8M")
	if !strings.Contains(examine(a), "Version : 1.2") {
		t.Errorf("flag did not win over MDTOOL_METADATA")
	}
	if c := bitmapChunk(a); c != "8 MB" {
		t.Errorf("flag --bitmap-chunk: Chunksize %q, want 8 MB", c)
	}

	// MDTOOL_HOMEHOST names the homehost like --homehost.
	t.Setenv("MDTOOL_HOMEHOST", "storage01")
	b := create()
	t.Setenv("MDTOOL_HOMEHOST", "")
	if !strings.Contains(examine(b), "Name : storage01:0") {
		t.Errorf("MDTOOL_HOMEHOST not applied:\n%s", examine(b))
	}

	// Safety switches are never taken from the environment.
	t.Setenv("MDTOOL_FORCE", "true")
	env, _, _ := testEnv("")
	if rc := Main([]string{"--create", "/dev/md0", "-l1", "-n1", "--run", a}, env); rc != 2 {
		t.Errorf("MDTOOL_FORCE must not act as --force: exit %d", rc)
	}

	// A broken config file is a clear error, not ignored.
	if err := os.WriteFile(conf, []byte("metadata: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _, errb := testEnv("")
	if rc := Main([]string{"-E", a}, env); rc != 2 || !strings.Contains(errb.String(), "config file") {
		t.Errorf("broken config: exit %d, stderr %q", rc, errb)
	}
}
