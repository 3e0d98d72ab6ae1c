// Command mdvm runs shell commands against the real Linux md driver and
// mdadm inside a throw-away qemu VM, with the repository's own driver
// (internal/mdvm). For humans and for testdata generators:
//
//	go run ./internal/mdvm/cmd/mdvm [options] [--script FILE | -- 'commands']
//
// With neither --script nor --, the commands are read from stdin. Output:
// only the commands' combined stdout and stderr. Exit status: the
// commands' status; 124 when the run timed out, 125 when the VM ended
// without reporting one, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"mdtool/internal/mdvm"
)

type diskFlag struct {
	disks *[]mdvm.Disk
	mode  mdvm.Mode
}

func (d diskFlag) String() string { return "" }
func (d diskFlag) Set(v string) error {
	*d.disks = append(*d.disks, mdvm.Disk{Path: v, Mode: d.mode})
	return nil
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var r mdvm.Run
	fs := flag.NewFlagSet("mdvm", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mdvm [options] [--script FILE | -- 'shell commands']   (else: commands from stdin)")
		fs.PrintDefaults()
	}
	fs.Var(diskFlag{&r.Disks, mdvm.RW}, "disk", "attach `FILE` as the next virtio disk (/dev/vda, /dev/vdb, ...); guest writes land in it")
	fs.Var(diskFlag{&r.Disks, mdvm.COW}, "cowdisk", "like --disk, but guest writes go to a discarded overlay: `FILE` is never modified")
	fs.Var(diskFlag{&r.Disks, mdvm.RO}, "rodisk", "like --disk, but a read-only device (`FILE` never modified)")
	fs.StringVar(&r.Share, "share", "", "host `DIR` mounted read-write at /share in the guest (9p)")
	fs.IntVar(&r.Mem, "mem", 1024, "guest RAM in `MiB`")
	fs.IntVar(&r.SMP, "smp", 2, "guest vCPUs")
	timeout := fs.Int("timeout", 300, "hard limit for the run in `seconds`")
	fs.StringVar(&r.KLog, "klog", "", "save the guest kernel log to `FILE`")
	fs.StringVar(&r.Hostname, "hostname", "mdvm", "guest hostname (mdadm's homehost)")
	fs.BoolVar(&r.Trace, "trace", false, "run the commands with sh -x")
	var bins listFlag
	fs.Var(&bins, "bin", "also copy host binary `PATH` (and its libraries) into the guest's /usr/bin")
	fs.StringVar(&r.Kernel, "kernel", "", "kernel `VER`sion or prefix (default $MDVM_KERNEL, else the newest 6.1.x)")
	fs.BoolVar(&r.Rebuild, "rebuild", false, "rebuild the cached initramfs")
	script := fs.String("script", "", "read the commands from `FILE`")
	var verbose bool
	fs.BoolVar(&verbose, "v", false, "progress messages on stderr")
	fs.BoolVar(&verbose, "verbose", false, "same as -v")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dashdash := false
	for _, a := range args {
		if a == "--" {
			dashdash = true
			break
		}
	}
	switch {
	case *script != "" && dashdash:
		fmt.Fprintln(os.Stderr, "mdvm: give either --script or -- 'commands', not both")
		return 2
	case *script != "":
		if fs.NArg() > 0 {
			fmt.Fprintf(os.Stderr, "mdvm: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		data, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mdvm:", err)
			return 2
		}
		r.Script = string(data)
	case dashdash:
		r.Script = strings.Join(fs.Args(), " ")
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "mdvm: unexpected argument %q (commands go after --)\n", fs.Arg(0))
		return 2
	default:
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mdvm:", err)
			return 2
		}
		r.Script = string(data)
	}
	r.Bins = bins
	r.Timeout = time.Duration(*timeout) * time.Second
	if verbose {
		r.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := r.Exec(ctx)
	os.Stdout.Write(res.Output)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdvm:", err)
		switch {
		case res.Code != 0:
			return res.Code
		case ctx.Err() != nil:
			return 130
		}
		return 125
	}
	return res.Code
}
