//go:build linux

// Command ublktest serves an image file as /dev/ublkbN through
// internal/serve/ublkexport, for the kernel tests (in the mdvm guest) and
// the door benchmark. It is a test tool, not part of mdtool.
//
//	ublktest attach  -file F [-queues N -depth N -iomin B -ioopt B -pbs B -maxio B -boundary B -id N -discard -direct]
//	ublktest recover -file F -id N
//	ublktest attach  -members A,B,C,... [options]   (the engine's array on those members)
//	ublktest available                              (ublkexport.Available(true))
//
// It prints "DEVICE /dev/ublkbN ID N" once the device serves, then serves
// until SIGTERM or SIGINT, detaches and prints "DETACHED".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"mdtool/engine"
	"mdtool/internal/serve/export"
	"mdtool/internal/serve/ublkexport"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "available" {
		if err := ublkexport.Available(true); err != nil {
			fail(err)
		}
		fmt.Println("AVAILABLE")
		return
	}
	if len(os.Args) < 2 || (os.Args[1] != "attach" && os.Args[1] != "recover") {
		fmt.Fprintln(os.Stderr, "usage: ublktest attach|recover -file F [options] | ublktest available")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	file := fs.String("file", "", "image file or block device to serve")
	members := fs.String("members", "", "comma-separated md members: serve the engine's array")
	queues := fs.Int("queues", 0, "hardware queues (0: default)")
	depth := fs.Int("depth", 0, "queue depth (0: default)")
	iomin := fs.Uint("iomin", 0, "minimum_io_size hint in bytes")
	ioopt := fs.Uint("ioopt", 0, "optimal_io_size hint in bytes")
	pbs := fs.Uint("pbs", 0, "physical block size")
	maxio := fs.Uint("maxio", 0, "largest request in bytes")
	boundary := fs.Uint("boundary", 0, "requests never cross a multiple of this many bytes")
	id := fs.Int("id", -1, "device id")
	discard := fs.Bool("discard", false, "announce discard and write-zeroes")
	direct := fs.Bool("direct", false, "open -file with O_DIRECT")
	fs.Parse(os.Args[2:])
	var b export.Backend
	var arr *engine.Array
	if *members != "" {
		arr = openArray(strings.Split(*members, ","))
		eb := newArrayBackend(arr)
		b = eb
		if *iomin == 0 {
			*iomin = uint(arr.IOMin())
		}
		if *ioopt == 0 {
			*ioopt = uint(eb.pref)
		}
	} else {
		flags := os.O_RDWR
		if *direct {
			flags |= syscall.O_DIRECT
		}
		f, err := os.OpenFile(*file, flags, 0)
		if err != nil {
			fail(err)
		}
		if b, err = export.NewFile(f, 512, 4096, max(1<<20, uint32(*maxio))); err != nil {
			fail(err)
		}
	}
	o := ublkexport.Options{Queues: *queues, Depth: *depth, IOMin: uint32(*iomin), IOOpt: uint32(*ioopt),
		PhysicalBlock: uint32(*pbs), MaxIO: uint32(*maxio), Boundary: uint32(*boundary), ID: *id, Discard: *discard}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var d *ublkexport.Device
	var err error
	if mode == "attach" {
		d, err = ublkexport.Attach(context.Background(), b, o)
	} else {
		d, err = ublkexport.Recover(context.Background(), *id, b, o)
	}
	if err != nil {
		fail(err)
	}
	fmt.Printf("DEVICE %s ID %d\n", d.Path(), d.ID())
	<-sig
	if err := d.Detach(); err != nil {
		fail(err)
	}
	if err := d.Err(); err != nil {
		fail(err)
	}
	if arr != nil {
		if err := arr.Close(); err != nil {
			fail(err)
		}
	}
	fmt.Println("DETACHED")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ublktest:", err)
	os.Exit(1)
}

func openArray(paths []string) *engine.Array {
	var devs []engine.Device
	for _, p := range paths {
		d, err := engine.OpenFile(p, engine.FileOptions{Exclusive: true})
		if err != nil {
			fail(err)
		}
		devs = append(devs, d)
	}
	a, err := engine.Open(devs, engine.DefaultOptions())
	if err != nil {
		fail(err)
	}
	return a
}

// arrayBackend serves an engine.Array (as the daemon's Backend does,
// without metrics).
type arrayBackend struct {
	a              *engine.Array
	min, pref, max uint32
}

func newArrayBackend(a *engine.Array) *arrayBackend {
	min := uint32(a.BlockSize())
	pref := uint32(a.IOOpt())
	if pref == 0 {
		pref = max(min, 4096)
	}
	if pref%min != 0 {
		pref = (pref/min + 1) * min
	}
	return &arrayBackend{a: a, min: min, pref: pref, max: max(uint32(1<<20), pref)}
}

func (b *arrayBackend) ReadAt(p []byte, off int64) (int, error)     { return b.a.ReadAt(p, off) }
func (b *arrayBackend) WriteAt(p []byte, off int64) (int, error)    { return b.a.WriteAt(p, off) }
func (b *arrayBackend) WriteAtFUA(p []byte, off int64) (int, error) { return b.a.WriteAtFUA(p, off) }
func (b *arrayBackend) Flush() error                                { return b.a.Flush() }
func (b *arrayBackend) Discard(off, n int64) error                  { return b.a.Discard(off, n) }
func (b *arrayBackend) WriteZeroes(off, n int64, _ bool) error      { return b.a.WriteZeroes(off, n) }
func (b *arrayBackend) Size() int64                                 { return b.a.Size() }
func (b *arrayBackend) BlockSizes() (min, preferred, max uint32)    { return b.min, b.pref, b.max }
