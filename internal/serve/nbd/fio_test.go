package nbd_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	fiobench "mdtool/internal/nbdbench"
	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
)

func serveUnix(t *testing.T, be export.Backend) string {
	t.Helper()
	s, err := nbd.NewServer(nbd.Config{Exports: []nbd.Export{{Backend: be}}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	if _, err := s.ListenUnix(sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return "nbd+unix:///?socket=" + sock
}

const jobSize = 32 << 20

var verify = []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1"}

// TestFioVerify writes through the server with fio (libnbd) from 4 processes
// at iodepth 32 on distinct regions and has fio verify every block.
func TestFioVerify(t *testing.T) {
	nbd.RequireBin(t, "fio")
	mem, err := export.NewMem(4*jobSize, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	uri := serveUnix(t, mem)
	for _, j := range []fiobench.Job{
		{Name: "randwrite-verify", RW: "randwrite", BS: "4k", IODepth: 32, NumJobs: 4, Size: jobSize, Extra: verify},
		{Name: "seqwrite-verify", RW: "write", BS: "256k", IODepth: 32, NumJobs: 4, Size: jobSize, Extra: verify},
	} {
		t.Run(j.Name, func(t *testing.T) {
			res, out, err := fiobench.Run(context.Background(), uri, j)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if res.WriteBytes != 4*jobSize || res.ReadBytes != 4*jobSize {
				t.Fatalf("fio wrote %d and verified %d bytes, want %d each", res.WriteBytes, res.ReadBytes, 4*jobSize)
			}
		})
	}
}

// flipper corrupts one byte of every read that covers corruptAt.
type flipper struct {
	*export.Mem
	corruptAt int64
}

func (f flipper) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.Mem.ReadAt(p, off)
	if off <= f.corruptAt && f.corruptAt < off+int64(len(p)) {
		p[f.corruptAt-off] ^= 0x40
	}
	return n, err
}

// TestFioVerifyDetects is the control for TestFioVerify: the same job
// against a Backend that corrupts reads must fail.
func TestFioVerifyDetects(t *testing.T) {
	nbd.RequireBin(t, "fio")
	mem, err := export.NewMem(4*jobSize, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	uri := serveUnix(t, flipper{mem, 2*jobSize + 12345})
	j := fiobench.Job{Name: "seqwrite-verify", RW: "write", BS: "256k", IODepth: 32, NumJobs: 4, Size: jobSize, Extra: verify}
	_, out, err := fiobench.Run(context.Background(), uri, j)
	if err == nil {
		t.Fatalf("fio verified corrupted data:\n%s", out)
	}
	if !strings.Contains(out, "verify") {
		t.Fatalf("fio failed without a verify complaint: %v\n%s", err, out)
	}
}
