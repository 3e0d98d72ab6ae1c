package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Usage errors exit 2 before any VM starts.
func TestUsageErrors(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(script, []byte("true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--bogus"},
		{"--timeout", "x"},
		{"--script", script, "--", "true"},
		{"--script", filepath.Join(t.TempDir(), "missing.sh")},
		{"true"}, // commands must follow --
	} {
		if rc := run(args); rc != 2 {
			t.Errorf("mdvm %q exited %d, want 2", args, rc)
		}
	}
	if rc := run([]string{"--help"}); rc != 0 {
		t.Errorf("--help exited %d", rc)
	}
}
