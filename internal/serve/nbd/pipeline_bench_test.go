package nbd

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"mdtool/internal/serve/export"
)

// BenchmarkPipelined4K keeps 32 random 4 KiB reads or writes in flight on
// one connection, as fio at iodepth 32 does, against a tmpfs-backed file
// (pread/pwrite per request, like a member image on tmpfs) and memory,
// with inline execution (the default) and with workers only. Besides
// ns/op it reports the process's CPU time per request (server and this
// lean client together), which a busy machine disturbs less.
func BenchmarkPipelined4K(b *testing.B) {
	const size = 256 << 20
	backends := map[string]func(b *testing.B) export.Backend{
		"mem": func(b *testing.B) export.Backend { return newMem(b, size, 512, 4096, 1<<20) },
		"tmpfs": func(b *testing.B) export.Backend {
			dir := "/dev/shm"
			if _, err := os.Stat(dir); err != nil {
				dir = b.TempDir()
			}
			f, err := os.CreateTemp(dir, "nbdbench")
			if err != nil {
				b.Fatal(err)
			}
			os.Remove(f.Name())
			b.Cleanup(func() { f.Close() })
			if err := f.Truncate(size); err != nil {
				b.Fatal(err)
			}
			// Allocate the pages, as a filled member is.
			buf := make([]byte, 1<<20)
			for off := int64(0); off < size; off += int64(len(buf)) {
				f.WriteAt(buf, off)
			}
			fb, err := export.NewFile(f, 512, 4096, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			return fb
		},
	}
	for _, be := range []string{"tmpfs", "mem"} {
		for _, rw := range []string{"randwrite", "randread"} {
			for _, inl := range []int{0, -1} {
				name := fmt.Sprintf("%s/%s/inline=%v", be, rw, inl == 0)
				b.Run(name, func(b *testing.B) {
					backend := backends[be](b)
					_, sock := startUnix(b, Config{Exports: []Export{{Backend: backend}}, InlineMax: inl})
					pipeline(b, sock, rw == "randwrite", size)
				})
			}
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pipeline runs b.N requests with 32 in flight.
func pipeline(b *testing.B, sock string, write bool, size int64) {
	const depth = 32
	c := dialRaw(b, "unix", sock)
	c.start("", false, infoBlockSize)
	nc := c.nc
	nc.SetDeadline(time.Now().Add(10 * time.Minute))
	typ := uint16(cmdRead)
	if write {
		typ = cmdWrite
	}
	credits := make(chan struct{}, depth)
	for i := 0; i < depth; i++ {
		credits <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		var h [16]byte
		data := make([]byte, 4096)
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(nc, h[:]); err != nil {
				done <- err
				return
			}
			if e := binary.BigEndian.Uint32(h[4:]); e != 0 {
				done <- fmt.Errorf("errno %d", e)
				return
			}
			if !write {
				if _, err := io.ReadFull(nc, data); err != nil {
					done <- err
					return
				}
			}
			credits <- struct{}{}
		}
		done <- nil
	}()
	req := make([]byte, 28+4096)
	n := 28
	if write {
		n += 4096
	}
	blocks := uint64(size / 4096)
	x := uint64(88172645463325252)
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		<-credits
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.BigEndian.PutUint32(req[0:], magicRequest)
		binary.BigEndian.PutUint16(req[4:], 0)
		binary.BigEndian.PutUint16(req[6:], typ)
		binary.BigEndian.PutUint64(req[8:], uint64(i))
		binary.BigEndian.PutUint64(req[16:], (x%blocks)*4096)
		binary.BigEndian.PutUint32(req[24:], 4096)
		if _, err := nc.Write(req[:n]); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
