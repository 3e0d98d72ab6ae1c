package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/internal/nbdclient"
	"mdtool/internal/testkit/nbdkit"
)

// ioTarget is what a remote-member benchmark drives.
type ioTarget interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
}

// BenchmarkRemoteRAID1 compares, in one run, raid1 over two members on
// NBD servers (nbdkit file on loopback unix sockets) with the same raid1
// over the local image files and with the baseline of one NBD member
// alone: 4 KiB random reads and writes and 1 MiB sequential reads and
// writes, 32 in flight, with and without 1 ms added by the servers
// (nbdkit's delay filter).
func BenchmarkRemoteRAID1(b *testing.B) {
	nbdkit.Require(b)
	const size = 64 << 20
	for _, lat := range []string{"0", "1ms"} {
		dir := b.TempDir()
		mems := create(b, spec{level: "raid1", n: 2, devMiB: []int{size >> 20}})
		var imgs, uris []string
		for i, m := range mems {
			buf := make([]byte, m.Geometry().Size)
			m.ReadAt(buf, 0)
			img := filepath.Join(dir, fmt.Sprintf("m%d.img", i))
			if err := os.WriteFile(img, buf, 0o600); err != nil {
				b.Fatal(err)
			}
			args := []string{"file", img}
			if lat != "0" {
				args = []string{"--filter=delay", "file", img, "rdelay=" + lat, "wdelay=" + lat}
			}
			imgs = append(imgs, img)
			uris = append(uris, nbdkit.Start(b, args...).URI("nbd+unix"))
		}
		targets := []struct {
			variant string
			open    func() (ioTarget, func())
		}{
			{"nbd-raid1", func() (ioTarget, func()) {
				var devs []Device
				for _, u := range uris {
					d, err := OpenNBD(context.Background(), u, nbdclient.Options{Conns: 4})
					if err != nil {
						b.Fatal(err)
					}
					devs = append(devs, d)
				}
				a, err := Open(devs, testOptions())
				if err != nil {
					b.Fatal(err)
				}
				return a, func() { a.Close() }
			}},
			{"files-raid1", func() (ioTarget, func()) {
				var devs []Device
				for _, p := range imgs {
					d, err := OpenFile(p, FileOptions{})
					if err != nil {
						b.Fatal(err)
					}
					devs = append(devs, d)
				}
				a, err := Open(devs, testOptions())
				if err != nil {
					b.Fatal(err)
				}
				return a, func() { a.Close() }
			}},
			{"baseline", func() (ioTarget, func()) {
				u, _ := nbdclient.ParseURI(uris[0])
				c, err := nbdclient.Dial(context.Background(), u, nbdclient.Options{Conns: 4})
				if err != nil {
					b.Fatal(err)
				}
				// the array's data starts past the metadata: stay clear of it
				return offsetTarget{c, 8 << 20}, func() { c.Close() }
			}},
		}
		for _, w := range []struct {
			name  string
			bs    int
			write bool
			seq   bool
		}{{"4k-randread", 4 << 10, false, false}, {"4k-randwrite", 4 << 10, true, false}, {"1M-read", 1 << 20, false, true}, {"1M-write", 1 << 20, true, true}} {
			for _, tg := range targets {
				b.Run(fmt.Sprintf("lat=%s/%s/%s", lat, w.name, tg.variant), func(b *testing.B) {
					t, closeFn := tg.open()
					defer closeFn()
					span := int64(32 << 20)
					var next atomic.Int64
					b.SetParallelism(16) // 16 x GOMAXPROCS requests in flight
					b.SetBytes(int64(w.bs))
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						buf := make([]byte, w.bs)
						r := newRand(uint64(next.Add(1)))
						for pb.Next() {
							var off int64
							if w.seq {
								off = next.Add(int64(w.bs)) % (span / int64(w.bs)) * int64(w.bs)
							} else {
								off = r.Int64N(span/int64(w.bs)) * int64(w.bs)
							}
							var err error
							if w.write {
								_, err = t.WriteAt(buf, off)
							} else {
								_, err = t.ReadAt(buf, off)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "IOPS")
				})
			}
		}
	}
}

// offsetTarget shifts every access by off.
type offsetTarget struct {
	c   *nbdclient.Client
	off int64
}

func (o offsetTarget) ReadAt(p []byte, off int64) (int, error)  { return o.c.ReadAt(p, off+o.off) }
func (o offsetTarget) WriteAt(p []byte, off int64) (int, error) { return o.c.WriteAt(p, off+o.off) }
