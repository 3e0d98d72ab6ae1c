package cmd

import (
	"path/filepath"
	"strings"
	"testing"

	"mdtool/engine"
	"mdtool/internal/daemon"
)

// TestAssembleTLSLoadFails: a TLS certificate that cannot be loaded stops
// the start after the engine opened the members: one "TLS for" line, exit
// 1, no daemon left and the members released.
func TestAssembleTLSLoadFails(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/tls", 2, 24<<20, "-l1", "-n2", "--assume-clean")
	cert, key := filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key")
	code, _, errs := mdtool(t, append([]string{"assemble", "--foreground", "--run-dir", runDir,
		"--nbd-socket", "none", "--nbd-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
		"/dev/md/tls"}, devs...)...)
	if code != 1 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	want := "mdtool: TLS for /dev/md/tls: open " + cert + ": no such file or directory\n"
	if !strings.Contains(errs, want) {
		t.Errorf("stderr:\n%s\nwant it to contain %q", errs, want)
	}
	if strings.Contains(errs, "has been started") {
		t.Errorf("started:\n%s", errs)
	}
	if names, _ := daemon.Names(runDir); len(names) != 0 {
		t.Errorf("daemons left running: %v", names)
	}
	for _, p := range devs {
		fd, err := engine.OpenFile(p, engine.FileOptions{Exclusive: true})
		if err != nil {
			t.Errorf("%s still held: %v", p, err)
			continue
		}
		fd.Close()
	}
}
