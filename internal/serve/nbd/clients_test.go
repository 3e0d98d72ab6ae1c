package nbd

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mdtool/internal/serve/export"
)

// nbdinfoJSON is the part of `nbdinfo --json` the tests read.
type nbdinfoJSON struct {
	Protocol   string `json:"protocol"`
	TLS        bool   `json:"TLS"`
	Structured bool   `json:"structured"`
	Exports    []struct {
		Name         string `json:"export-name"`
		Description  string `json:"description"`
		Size         int64  `json:"export-size"`
		ReadOnly     bool   `json:"is_read_only"`
		CanFlush     bool   `json:"can_flush"`
		CanFUA       bool   `json:"can_fua"`
		CanTrim      bool   `json:"can_trim"`
		CanZero      bool   `json:"can_zero"`
		CanMultiConn bool   `json:"can_multi_conn"`
		CanDF        bool   `json:"can_df"`
		Min          uint32 `json:"block_size_minimum"`
		Pref         uint32 `json:"block_size_preferred"`
		Max          uint32 `json:"block_size_maximum"`
	} `json:"exports"`
}

func nbdinfo(t *testing.T, args ...string) nbdinfoJSON {
	t.Helper()
	out, err := exec.Command("nbdinfo", append([]string{"--json"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nbdinfo %q: %v\n%s", args, err, out)
	}
	var v nbdinfoJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("nbdinfo output: %v\n%s", err, out)
	}
	return v
}

// TestNbdinfo checks what libnbd's nbdinfo sees over a unix socket and over
// TCP: size, flags and the block size constraints.
func TestNbdinfo(t *testing.T) {
	requireBin(t, "nbdinfo")
	a := newMem(t, 64<<20, 4096, 65536, 1<<20)
	ro := newMem(t, 24<<20, 512, 3*65536, 2<<20) // preferred: a 3-disk full stripe
	s, sock := startUnix(t, Config{Exports: []Export{
		{Name: "a", Description: "test export", Backend: a},
		{Name: "ro", Backend: ro, ReadOnly: true},
	}})
	l, err := s.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{
		"nbd+unix:///a?socket=" + sock,
		fmt.Sprintf("nbd://%s/a", l.Addr()),
	} {
		t.Run(strings.SplitN(uri, ":", 2)[0], func(t *testing.T) {
			v := nbdinfo(t, uri)
			if v.Protocol != "newstyle-fixed" || !v.Structured || v.TLS || len(v.Exports) != 1 {
				t.Fatalf("protocol %q structured %v TLS %v exports %d", v.Protocol, v.Structured, v.TLS, len(v.Exports))
			}
			e := v.Exports[0]
			if e.Name != "a" || e.Description != "test export" || e.Size != 64<<20 {
				t.Errorf("name %q description %q size %d", e.Name, e.Description, e.Size)
			}
			if e.Min != 4096 || e.Pref != 65536 || e.Max != 1<<20 {
				t.Errorf("block sizes %d/%d/%d, want 4096/65536/1048576", e.Min, e.Pref, e.Max)
			}
			if e.ReadOnly || !e.CanFlush || !e.CanFUA || !e.CanTrim || !e.CanZero || !e.CanMultiConn || e.CanDF {
				t.Errorf("flags %+v", e)
			}
		})
	}
	t.Run("read-only", func(t *testing.T) {
		v := nbdinfo(t, "nbd+unix:///ro?socket="+sock)
		e := v.Exports[0]
		if !e.ReadOnly || e.CanTrim || e.CanZero || e.Size != 24<<20 {
			t.Errorf("flags %+v", e)
		}
		if e.Min != 512 || e.Pref != 262144 || e.Max != 2<<20 {
			t.Errorf("block sizes %d/%d/%d, want 512/262144/2097152", e.Min, e.Pref, e.Max)
		}
	})
	t.Run("list", func(t *testing.T) {
		v := nbdinfo(t, "--list", "nbd+unix:///?socket="+sock)
		var names []string
		for _, e := range v.Exports {
			names = append(names, e.Name+"|"+e.Description)
		}
		if !slices.Equal(names, []string{"a|test export", "ro|"}) {
			t.Fatalf("exports %q", names)
		}
	})
}

// TestNbdcopy copies a 64 MiB random file into an export and back out with
// nbdcopy (4 connections, multi-conn) and compares the bytes, for the
// in-memory and the file Backend.
func TestNbdcopy(t *testing.T) {
	requireBin(t, "nbdcopy")
	const size = 64 << 20
	dir := t.TempDir()
	src := make([]byte, size)
	rand.Read(src)
	in := filepath.Join(dir, "in.img")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "backing.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	fb, err := export.NewFile(f, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		be   export.Backend
	}{
		{"mem", newMem(t, size, 512, 65536, 1<<20)},
		{"file", fb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb := &recBackend{Backend: tc.be}
			_, sock := startUnix(t, Config{Exports: []Export{{Backend: rb}}})
			uri := "nbd+unix:///?socket=" + sock
			run := func(args ...string) {
				t.Helper()
				if out, err := exec.Command("nbdcopy", args...).CombinedOutput(); err != nil {
					t.Fatalf("nbdcopy %q: %v\n%s", args, err, out)
				}
			}
			run("--flush", in, uri)
			if !slices.Contains(rb.Calls(), "flush") {
				t.Error("nbdcopy --flush did not reach Backend.Flush")
			}
			mustEqual(t, "backend after nbdcopy in", snapshot(t, tc.be), src)
			out := filepath.Join(dir, tc.name+"-out.img")
			run(uri, out)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) {
				mustEqual(t, "nbdcopy out", got, src)
			}
		})
	}
}
