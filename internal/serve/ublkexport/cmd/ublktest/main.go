//go:build linux

// Command ublktest serves an image file as /dev/ublkbN through
// internal/serve/ublkexport, for the kernel tests (in the mdvm guest) and
// the door benchmark. It is a test tool, not part of mdtool.
//
//	ublktest attach  -file F [-queues N -depth N -iomin B -ioopt B -pbs B -id N -discard]
//	ublktest recover -file F -id N
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
	"syscall"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/ublkexport"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "attach" && os.Args[1] != "recover") {
		fmt.Fprintln(os.Stderr, "usage: ublktest attach|recover -file F [options]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	file := fs.String("file", "", "image file or block device to serve")
	queues := fs.Int("queues", 0, "hardware queues (0: default)")
	depth := fs.Int("depth", 0, "queue depth (0: default)")
	iomin := fs.Uint("iomin", 0, "minimum_io_size hint in bytes")
	ioopt := fs.Uint("ioopt", 0, "optimal_io_size hint in bytes")
	pbs := fs.Uint("pbs", 0, "physical block size")
	maxio := fs.Uint("maxio", 0, "largest request in bytes")
	id := fs.Int("id", -1, "device id")
	discard := fs.Bool("discard", false, "announce discard and write-zeroes")
	fs.Parse(os.Args[2:])
	f, err := os.OpenFile(*file, os.O_RDWR, 0)
	if err != nil {
		fail(err)
	}
	b, err := export.NewFile(f, 512, 4096, 1<<20)
	if err != nil {
		fail(err)
	}
	o := ublkexport.Options{Queues: *queues, Depth: *depth, IOMin: uint32(*iomin), IOOpt: uint32(*ioopt),
		PhysicalBlock: uint32(*pbs), MaxIO: uint32(*maxio), ID: *id, Discard: *discard}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var d *ublkexport.Device
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
	fmt.Println("DETACHED")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ublktest:", err)
	os.Exit(1)
}
