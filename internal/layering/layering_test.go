package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// room places a package (or, with a trailing "/...", a package and
// everything under it) of the module at a rank.
type room struct {
	pattern string // module-relative: "engine", "internal/mdadm/...", "." (main)
	rank    int    // harness: -1
	leaf    bool   // imports nothing of the module
}

const harness = -1

// rooms is the layering of mdtool. A package may import packages of lower
// rank, and packages of its own internal/X room; superblock and bitmap
// import nothing of the module. Production packages never import a
// harness; harnesses may import anything.
var rooms = []room{
	{pattern: "superblock", rank: 0, leaf: true},
	{pattern: "bitmap", rank: 0, leaf: true},
	{pattern: "ioctl", rank: 0},
	{pattern: "engine/layout", rank: 1},
	{pattern: "engine/parity", rank: 1},
	{pattern: "engine/backupfile", rank: 1, leaf: true},
	{pattern: "engine/r5log", rank: 1, leaf: true},
	{pattern: "engine/wib", rank: 2},
	{pattern: "internal/nbdclient", rank: 2},
	{pattern: "engine", rank: 3},
	{pattern: "internal/mdadm/...", rank: 3},
	{pattern: "internal/serve/...", rank: 4},
	{pattern: "internal/daemon/...", rank: 5},
	{pattern: "cmd", rank: 6},
	{pattern: ".", rank: 7},

	{pattern: "internal/mdvm/...", rank: harness},
	{pattern: "internal/fixture/...", rank: harness},
	{pattern: "internal/crashload/...", rank: harness},
	{pattern: "internal/membermodel/...", rank: harness},
	{pattern: "internal/benchtable/...", rank: harness},
	{pattern: "internal/nbdbench/...", rank: harness},
	{pattern: "internal/testkit/...", rank: harness},
	{pattern: "internal/layering/...", rank: harness},
}

// place finds the room of a module-relative package path.
func place(rel string) (room, bool) {
	for _, r := range rooms {
		if p, ok := strings.CutSuffix(r.pattern, "/..."); ok {
			if rel == p || strings.HasPrefix(rel, p+"/") {
				return r, true
			}
		} else if rel == r.pattern {
			return r, true
		}
	}
	return room{}, false
}

// internalRoom is the internal/X of a package under internal/, else "".
func internalRoom(rel string) string {
	parts := strings.Split(rel, "/")
	if len(parts) >= 2 && parts[0] == "internal" {
		return parts[0] + "/" + parts[1]
	}
	return ""
}

// check returns the layering violations of an import graph (package ->
// its non-test imports, all as full import paths) of module mod.
func check(mod string, graph map[string][]string) []string {
	rel := func(p string) (string, bool) {
		if p == mod {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	var bad []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		pr, ok := rel(p)
		if !ok {
			continue
		}
		from, ok := place(pr)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: package not placed in the layering table (add it to rooms in internal/layering/layering_test.go)", pr))
			continue
		}
		for _, q := range graph[p] {
			qr, ok := rel(q)
			if !ok {
				continue // standard library or another module
			}
			to, ok := place(qr)
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s imports %s, which is not placed in the layering table", pr, qr))
			case from.rank == harness:
				// harnesses may import anything
			case to.rank == harness:
				bad = append(bad, fmt.Sprintf("%s (production) imports the test harness %s", pr, qr))
			case from.leaf:
				bad = append(bad, fmt.Sprintf("%s imports %s: it may import nothing of the module", pr, qr))
			case to.rank < from.rank:
			case internalRoom(pr) != "" && internalRoom(pr) == internalRoom(qr):
			default:
				bad = append(bad, fmt.Sprintf("%s (rank %d) imports %s (rank %d): only lower ranks or its own internal/ room", pr, from.rank, qr, to.rank))
			}
		}
	}
	return bad
}

// goList returns the module path and the non-test import graph of the
// module's packages.
func goList(t *testing.T) (string, map[string][]string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	mod := strings.TrimSpace(string(run("list", "-m", "-f", "{{.Path}}")))
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(run("list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return mod, graph
}

// TestLayering: the module's real import graph keeps the layering.
func TestLayering(t *testing.T) {
	mod, graph := goList(t)
	if mod != "mdtool" {
		t.Fatalf("module %q, want mdtool", mod)
	}
	// The listing must see the whole module, or the test proves nothing.
	for _, p := range []string{"mdtool", "mdtool/cmd", "mdtool/engine", "mdtool/superblock", "mdtool/internal/daemon"} {
		if _, ok := graph[p]; !ok {
			t.Fatalf("go list did not list %s (listed %d packages)", p, len(graph))
		}
	}
	for _, v := range check(mod, graph) {
		t.Error(v)
	}
	// engine/ holds only the array and its leaves.
	for p := range graph {
		if r, ok := strings.CutPrefix(p, mod+"/engine/"); ok {
			if pl, _ := place("engine/" + r); pl.rank > 2 || pl.rank < 1 {
				t.Errorf("%s: engine/ holds only the array and its leaves (layout, parity, wib, backupfile)", p)
			}
		}
	}
}

// TestCheckCatches: the checker reports each kind of violation on a fake
// import graph, and accepts what the rules allow.
func TestCheckCatches(t *testing.T) {
	for _, c := range []struct {
		name    string
		graph   map[string][]string
		wantBad string // substring of the single violation; "" for none
	}{
		{"ok downward", map[string][]string{"m/cmd": {"m/engine", "m/internal/daemon", "fmt"}, "m/engine": {"m/engine/wib", "m/engine/layout"}}, ""},
		{"ok same internal room", map[string][]string{"m/internal/serve/nbd": {"m/internal/serve/export"}, "m/internal/mdadm/plan": {"m/internal/mdadm/member"}}, ""},
		{"ok harness imports production", map[string][]string{"m/internal/fixture": {"m/cmd", "m/internal/mdvm"}, "m/internal/nbdbench/cmd/nbdbench": {"m/internal/daemon"}}, ""},
		{"ok other modules", map[string][]string{"m/engine": {"github.com/x/y", "m2/cmd"}}, ""},
		{"upward", map[string][]string{"m/engine/layout": {"m/engine/wib"}}, "engine/layout (rank 1) imports engine/wib (rank 2)"},
		{"array imports mdadm rules", map[string][]string{"m/engine": {"m/internal/mdadm/member"}}, "engine (rank 3) imports internal/mdadm/member (rank 3)"},
		{"mdadm rules import array", map[string][]string{"m/internal/mdadm/probe": {"m/engine"}}, "internal/mdadm/probe (rank 3) imports engine (rank 3)"},
		{"serve imports daemon", map[string][]string{"m/internal/serve/nbd": {"m/internal/daemon"}}, "internal/serve/nbd (rank 4) imports internal/daemon (rank 5)"},
		{"cmd imports main", map[string][]string{"m/cmd": {"m"}}, "cmd (rank 6) imports . (rank 7)"},
		{"same rank leaves", map[string][]string{"m/engine/layout": {"m/engine/parity"}}, "engine/layout (rank 1) imports engine/parity (rank 1)"},
		{"production imports harness", map[string][]string{"m/cmd": {"m/internal/fixture"}}, "cmd (production) imports the test harness internal/fixture"},
		{"production imports nested harness", map[string][]string{"m/internal/daemon": {"m/internal/testkit/fake"}}, "imports the test harness internal/testkit/fake"},
		{"leaf imports", map[string][]string{"m/superblock": {"m/bitmap"}}, "superblock imports bitmap: it may import nothing"},
		{"ioctl is not a leaf but same rank", map[string][]string{"m/ioctl": {"m/superblock"}}, "ioctl (rank 0) imports superblock (rank 0)"},
		{"unknown package", map[string][]string{"m/internal/newroom": nil}, "internal/newroom: package not placed in the layering table"},
		{"unknown import", map[string][]string{"m/cmd": {"m/engine/newthing"}}, "cmd imports engine/newthing, which is not placed"},
	} {
		bad := check("m", c.graph)
		switch {
		case c.wantBad == "" && len(bad) != 0:
			t.Errorf("%s: unexpected violations %q", c.name, bad)
		case c.wantBad != "" && (len(bad) != 1 || !strings.Contains(bad[0], c.wantBad)):
			t.Errorf("%s: violations %q, want one containing %q", c.name, bad, c.wantBad)
		}
	}
}
