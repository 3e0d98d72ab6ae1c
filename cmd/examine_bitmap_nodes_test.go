package cmd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestExamineBitmapClusterNodesBounded: a damaged nodes field of a
// clustered (version 4) bitmap costs at most what fits in the bitmap
// area: nodes=1000 lists the node bitmaps that fit between the bitmap and
// the data and says so; nodes=0xffffffff is mdadm's int -1 and lists
// none. The valid clustered bitmap keeps mdadm's text (bitmap-cluster in
// TestSyntheticVsMdadm).
func TestExamineBitmapClusterNodesBounded(t *testing.T) {
	for _, tc := range []struct {
		nodes     uint32
		wrap      bool // sync_size and chunksize make calc_bitmap_size wrap to 0
		slots     int  // node slots listed
		wantWarn  bool
		nodesText string
	}{
		{1000, false, -1, true, "   Cluster nodes : 1000\n"},
		{0xffffffff, false, 0, false, "   Cluster nodes : -1\n"},
		{1000, true, -2, true, "   Cluster nodes : 1000\n"},
	} {
		v := synthVariant{name: "bitmap-nodes", base: "run1/vda", bitmap: true, edit: func(b []byte) {
			putLE32(sbBitmap(b), 4, 4) // BITMAP_MAJOR_CLUSTERED
			putLE32(sbBitmap(b), 68, tc.nodes)
			copy(sbBitmap(b)[72:], "clus")
			if tc.wrap {
				putLE64(sbBitmap(b), 40, 8*(1<<32-256)) // sync_size
				putLE32(sbBitmap(b), 52, 512)           // chunksize
			}
		}}
		img := synthImage(t, v, t.TempDir())
		for _, argv := range [][]string{{"-X", img}, {"-X", "--brief", img}, {"examine-bitmap", "--json", img}} {
			done := make(chan runResult, 1)
			go func() { done <- runMdtool(t, vmHost, argv...) }()
			var r runResult
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("nodes=%#x %v: still running after 2 minutes", tc.nodes, argv)
			}
			if r.code != 0 {
				t.Fatalf("nodes=%#x %v: exit %d, stderr %q", tc.nodes, argv, r.code, r.stderr)
			}
			if argv[1] == "--json" {
				var docs []struct {
					Nodes       uint32            `json:"nodes"`
					NodeBitmaps []json.RawMessage `json:"node_bitmaps"`
					Problems    []struct {
						Field string `json:"field"`
					} `json:"problems"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &docs); err != nil || len(docs) != 1 {
					t.Fatalf("json: %v %q", err, r.stdout)
				}
				d := docs[0]
				if d.Nodes != tc.nodes {
					t.Errorf("json nodes %d", d.Nodes)
				}
				hasProblem := false
				for _, p := range d.Problems {
					hasProblem = hasProblem || p.Field == "nodes"
				}
				if hasProblem != tc.wantWarn {
					t.Errorf("nodes=%#x json: nodes problem %v, want %v", tc.nodes, hasProblem, tc.wantWarn)
				}
				if tc.slots >= 0 && len(d.NodeBitmaps) != tc.slots || tc.slots < 0 && (len(d.NodeBitmaps) == 0 || len(d.NodeBitmaps) > 254) {
					t.Errorf("nodes=%#x json: %d node bitmaps", tc.nodes, len(d.NodeBitmaps))
				}
				continue
			}
			if !strings.Contains(r.stdout, tc.nodesText) {
				t.Errorf("nodes=%#x %v: no %q in\n%s", tc.nodes, argv, tc.nodesText, r.stdout)
			}
			slots := strings.Count(r.stdout, "       Node Slot : ")
			if tc.slots >= 0 && slots != tc.slots {
				t.Errorf("nodes=%#x %v: %d node slots listed, want %d", tc.nodes, argv, slots, tc.slots)
			}
			if tc.slots == -2 && (slots == 0 || slots > 254) {
				t.Errorf("nodes=%#x wrapped size %v: %d node slots listed", tc.nodes, argv, slots)
			}
			if tc.slots == -1 {
				// run1/vda: the bitmap starts 8 sectors after the 1.2
				// superblock (sector 16) and the data at sector 2048:
				// (2048-16)/8 one-page node bitmaps fit.
				if slots != 254 {
					t.Errorf("nodes=%#x %v: %d node slots listed, want 254", tc.nodes, argv, slots)
				}
			}
			warned := strings.Contains(r.stderr, "node bitmaps fit in the bitmap area")
			if warned != tc.wantWarn {
				t.Errorf("nodes=%#x %v: warning %v, stderr %q", tc.nodes, argv, warned, r.stderr)
			}
		}
	}
}
