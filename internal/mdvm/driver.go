package mdvm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The in-repo VM driver: it boots Debian's kernel under qemu (TCG) with a
// small initramfs (static busybox, the host's mdadm and its libraries, the
// md modules), attaches the disks as /dev/vda.., runs the script with
// busybox sh and returns its output and exit status.

//go:embed guest/init.sh
var guestInit []byte

//go:embed guest/mdvm-crash.sh
var guestCrash []byte

// driverVersion changes the cache key when the initramfs recipe changes.
const driverVersion = "go-1"

// baseModules are loaded in the guest (with their dependencies from
// modules.dep, in dependency order). crc32c_generic first: libcrc32c
// wants a crc32c implementation when it loads.
var baseModules = []string{"crc32c_generic", "virtio_pci", "virtio_blk", "md-mod", "linear", "raid0", "raid1", "raid10", "raid456", "loop"}

// optionalModules may be missing from a kernel: md-linear was removed in
// Linux 6.8 and came back in 6.14, so Debian's 6.12 has none.
var optionalModules = map[string]bool{"linear": true}

// present drops the optional modules this kernel does not have.
func (md *modDeps) present(names []string, builtin map[string]bool) []string {
	var out []string
	for _, n := range names {
		k := strings.ReplaceAll(n, "-", "_")
		if _, ok := md.byName[k]; !ok && !builtin[k] && optionalModules[n] {
			continue
		}
		out = append(out, n)
	}
	return out
}

var shareModules = []string{"9pnet_virtio", "9p"}

// ErrTimeout is returned (wrapped) when the guest did not finish in time.
var ErrTimeout = errors.New("timeout")

// ErrNoStatus is returned (wrapped) when the VM ended without reporting
// the script's exit status (panic, qemu error) or never booted.
var ErrNoStatus = errors.New("VM ended without reporting an exit status")

// kernel is a kernel to boot.
type kernel struct {
	ver     string // uname -r
	image   string // /boot/vmlinuz-VER
	modDir  string // /lib/modules/VER
	config  string // /boot/config-VER
	bootDir string
}

// pickKernel finds the kernel: want (a version or a prefix such as
// "6.12": the newest match), else $MDVM_KERNEL, else the newest 6.1.x
// with modules, else the newest kernel with modules.
func pickKernel(want string) (kernel, error) {
	if want == "" {
		want = os.Getenv("MDVM_KERNEL")
	}
	imgs, _ := filepath.Glob("/boot/vmlinuz-*")
	var vers []string
	for _, p := range imgs {
		v := strings.TrimPrefix(p, "/boot/vmlinuz-")
		if _, err := os.Stat(filepath.Join("/lib/modules", v, "modules.dep")); err == nil {
			vers = append(vers, v)
		}
	}
	sort.Slice(vers, func(i, j int) bool { return versionLess(vers[i], vers[j]) })
	best, ref := "", ""
	for _, v := range vers {
		if want != "" {
			if v == want || strings.HasPrefix(v, want+".") || strings.HasPrefix(v, want+"-") || strings.HasPrefix(v, want+"+") {
				best = v
			}
			continue
		}
		best = v
		if strings.HasPrefix(v, "6.1.") {
			ref = v
		}
	}
	if want == "" && ref != "" {
		best = ref
	}
	if best == "" {
		if want != "" {
			return kernel{}, fmt.Errorf("kernel %s not installed (ls /boot/vmlinuz-*)", want)
		}
		return kernel{}, errors.New("no kernel with modules in /boot (apt-get install linux-image-amd64)")
	}
	return kernel{
		ver:    best,
		image:  "/boot/vmlinuz-" + best,
		modDir: "/lib/modules/" + best,
		config: "/boot/config-" + best,
	}, nil
}

// versionLess compares versions like sort -V does for kernel names: runs
// of digits numerically, the rest bytewise.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			na, _ := strconv.ParseUint(da, 10, 64)
			nb, _ := strconv.ParseUint(db, 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// cacheDir is $MDVM_CACHE, else /var/cache/mdtool-mdvm for root, else
// ~/.cache/mdtool-mdvm.
func cacheDir() (string, error) {
	d := os.Getenv("MDVM_CACHE")
	if d == "" {
		if os.Geteuid() == 0 {
			d = "/var/cache/mdtool-mdvm"
		} else {
			c, err := os.UserCacheDir()
			if err != nil {
				return "", err
			}
			d = filepath.Join(c, "mdtool-mdvm")
		}
	}
	return d, os.MkdirAll(d, 0o755)
}

func findBusybox() (string, error) {
	for _, b := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(b); err != nil {
			continue
		}
		// must be static (busybox-static): no libraries are copied for it
		if libs, _ := sharedLibs(b); len(libs) == 0 {
			return b, nil
		}
	}
	return "", errors.New("static busybox not found (apt-get install busybox-static)")
}

func findMdadm() (string, error) {
	if p, err := exec.LookPath("mdadm"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/sbin/mdadm", "/usr/sbin/mdadm"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("mdadm not found (apt-get install mdadm)")
}

// sharedLibs lists the libraries ldd names for a binary (none for a
// static one).
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, nil // "not a dynamic executable"
	}
	var libs []string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			if _, err := os.Stat(f); err == nil {
				libs = append(libs, f)
			}
		}
	}
	return libs, nil
}

// modDeps is a kernel's modules.dep: relative path -> dependencies, and
// the normalised module name -> relative path.
type modDeps struct {
	deps   map[string][]string
	byName map[string]string
}

func modName(p string) string {
	n := filepath.Base(p)
	if i := strings.Index(n, ".ko"); i >= 0 {
		n = n[:i]
	}
	return strings.ReplaceAll(n, "-", "_")
}

func readModDeps(modDir string) (*modDeps, error) {
	f, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	md := &modDeps{deps: map[string][]string{}, byName: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		md.deps[p] = strings.Fields(rest)
		md.byName[modName(p)] = p
	}
	return md, sc.Err()
}

// order resolves names to module paths, dependencies first, skipping
// those in seen (which it extends). Built-in modules are skipped; a
// module that is neither is an error.
func (md *modDeps) order(names []string, builtin map[string]bool, seen map[string]bool) ([]string, error) {
	var out []string
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, d := range md.deps[p] {
			visit(d)
		}
		out = append(out, p)
	}
	for _, n := range names {
		p, ok := md.byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			if builtin[strings.ReplaceAll(n, "-", "_")] {
				continue
			}
			return nil, fmt.Errorf("kernel module %s not found", n)
		}
		visit(p)
	}
	return out, nil
}

func readBuiltin(modDir string) map[string]bool {
	b := map[string]bool{}
	data, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			b[modName(l)] = true
		}
	}
	return b
}

// readModule returns an uncompressed module (.ko, .ko.xz, .ko.zst, .ko.gz).
func readModule(path string) ([]byte, error) {
	switch {
	case strings.HasSuffix(path, ".ko.xz"):
		return exec.Command("xz", "-dc", path).Output()
	case strings.HasSuffix(path, ".ko.zst"):
		return exec.Command("zstd", "-qdc", path).Output()
	case strings.HasSuffix(path, ".ko.gz"):
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		return io.ReadAll(z)
	}
	return os.ReadFile(path)
}

func koName(p string) string {
	if i := strings.Index(p, ".ko"); i >= 0 {
		return p[:i] + ".ko"
	}
	return p
}

// buildSpec is everything an initramfs depends on.
type buildSpec struct {
	k       kernel
	busybox string
	mdadm   string
	bins    []string // absolute, symlinks resolved
	modules []string // extra module names
}

func (s buildSpec) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%q\n%q\n", driverVersion, s.k.ver, s.modules, s.bins)
	for _, p := range append([]string{s.k.image, filepath.Join(s.k.modDir, "modules.dep"), s.busybox, s.mdadm}, s.bins...) {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", p, st.Size(), st.ModTime().UnixNano())
		}
	}
	h.Write(guestInit)
	h.Write(guestCrash)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// build makes the initramfs (gzip'd newc cpio).
func (s buildSpec) build(w io.Writer) error {
	a := newArchive()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc/mdvm", "etc/mdadm", "proc", "sys", "dev", "run", "tmp", "root", "share", "mdvm"} {
		a.dir(d)
	}
	bb, err := os.ReadFile(s.busybox)
	if err != nil {
		return err
	}
	a.file("bin/busybox", 0o755, bb)
	out, err := exec.Command(s.busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	for _, ap := range strings.Fields(string(out)) {
		if ap != "busybox" {
			a.symlink("bin/"+ap, "busybox")
		}
	}
	a.symlink("sbin/modprobe", "../bin/busybox")
	a.symlink("sbin/insmod", "../bin/busybox")
	addBin := func(src, dst string) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		a.file(dst, 0o755, data)
		libs, _ := sharedLibs(src)
		for _, l := range libs {
			if a.has(l) {
				continue
			}
			data, err := os.ReadFile(l) // follows symlinks
			if err != nil {
				return err
			}
			a.file(l, 0o755, data)
		}
		return nil
	}
	if err := addBin(s.mdadm, "sbin/mdadm"); err != nil {
		return err
	}
	for _, b := range s.bins {
		if err := addBin(b, "usr/bin/"+filepath.Base(b)); err != nil {
			return err
		}
	}
	md, err := readModDeps(s.k.modDir)
	if err != nil {
		return err
	}
	builtin := readBuiltin(s.k.modDir)
	seen := map[string]bool{}
	main, err := md.order(append(md.present(baseModules, builtin), s.modules...), builtin, seen)
	if err != nil {
		return err
	}
	p9, err := md.order(shareModules, builtin, seen)
	if err != nil {
		return err
	}
	kdir := "lib/modules/" + s.k.ver + "/"
	var dep bytes.Buffer
	for _, p := range append(append([]string(nil), main...), p9...) {
		data, err := readModule(filepath.Join(s.k.modDir, p))
		if err != nil {
			return fmt.Errorf("module %s: %w", p, err)
		}
		a.file(kdir+koName(p), 0o644, data)
		fmt.Fprintf(&dep, "%s:", koName(p))
		for _, d := range md.deps[p] {
			fmt.Fprintf(&dep, " %s", koName(d))
		}
		dep.WriteByte('\n')
	}
	// a modules.dep of what is shipped, so that busybox modprobe works
	a.file(kdir+"modules.dep", 0o644, dep.Bytes())
	for _, f := range []string{"modules.builtin", "modules.order"} {
		if data, err := os.ReadFile(filepath.Join(s.k.modDir, f)); err == nil {
			a.file(kdir+f, 0o644, data)
		}
	}
	list := func(ps []string) []byte {
		var b bytes.Buffer
		for _, p := range ps {
			b.WriteString(koName(p) + "\n")
		}
		return b.Bytes()
	}
	a.file("etc/mdvm/modules", 0o644, list(main))
	a.file("etc/mdvm/modules.9p", 0o644, list(p9))
	a.file("init", 0o755, guestInit)
	a.file("bin/mdvm-crash", 0o755, guestCrash)
	// no /etc/mdadm/mdadm.conf: mdadm runs with its built-in defaults
	z, _ := gzip.NewWriterLevel(w, 6)
	if err := a.writeTo(z); err != nil {
		return err
	}
	return z.Close()
}

// writeAtomic writes a cache file through a temporary name, so that
// concurrent test binaries never see half a file.
func writeAtomic(path string, fill func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// initramfs returns the cached initramfs for s, building it when needed.
func initramfs(s buildSpec, rebuild bool, logf func(string, ...any)) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "initrd-"+s.k.ver+"-"+s.key()+".cpio.gz")
	if st, err := os.Stat(p); err == nil && st.Size() > 0 && !rebuild {
		now := time.Now()
		os.Chtimes(p, now, now)
		return p, nil
	}
	logf("building initramfs for %s -> %s", s.k.ver, p)
	if err := writeAtomic(p, s.build); err != nil {
		return "", fmt.Errorf("building the initramfs: %w", err)
	}
	pruneCache(dir)
	return p, nil
}

// pruneCache removes cached images nobody used for three days.
func pruneCache(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 72*time.Hour {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// bootImage returns what qemu boots: under TCG, decompressing the bzImage
// costs seconds per boot, so when the kernel has a PVH entry point
// (CONFIG_PVH=y) its uncompressed ELF vmlinux is extracted once, cached,
// and booted directly. MDVM_PVH=0 boots the bzImage.
func bootImage(k kernel, logf func(string, ...any)) string {
	if os.Getenv("MDVM_PVH") == "0" {
		return k.image
	}
	cfg, err := os.ReadFile(k.config)
	if err != nil || !bytes.Contains(cfg, []byte("\nCONFIG_PVH=y\n")) {
		return k.image
	}
	dir, err := cacheDir()
	if err != nil {
		return k.image
	}
	st, err := os.Stat(k.image)
	if err != nil {
		return k.image
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %d %d", k.image, st.Size(), st.ModTime().UnixNano()))
	p := filepath.Join(dir, "vmlinux-"+k.ver+"-"+hex.EncodeToString(sum[:8])+".elf")
	if st, err := os.Stat(p); err == nil && st.Size() > 0 {
		now := time.Now()
		os.Chtimes(p, now, now)
		return p
	}
	img, err := os.ReadFile(k.image)
	if err != nil {
		return k.image
	}
	logf("extracting the uncompressed vmlinux -> %s", p)
	magics := []struct {
		magic []byte
		cmd   []string
	}{
		{[]byte("\xfd7zXZ\x00"), []string{"xz", "-dc", "--single-stream"}},
		{[]byte("\x28\xb5\x2f\xfd"), []string{"zstd", "-qdc"}},
		{[]byte("\x1f\x8b\x08"), []string{"gzip", "-dc"}},
	}
	for _, m := range magics {
		off := 0
		for tries := 0; tries < 5; tries++ {
			i := bytes.Index(img[off:], m.magic)
			if i < 0 {
				break
			}
			off += i
			cmd := exec.Command(m.cmd[0], m.cmd[1:]...)
			cmd.Stdin = bytes.NewReader(img[off:])
			out, _ := cmd.Output() // trailing garbage makes it fail after the stream
			if len(out) > 4 && bytes.Equal(out[:4], []byte("\x7fELF")) {
				if err := writeAtomic(p, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
					return k.image
				}
				return p
			}
			off++
		}
	}
	logf("could not extract vmlinux; booting the bzImage")
	return k.image
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// prepared is one run made ready: the kernel, the initrd with the run's
// commands appended, the qemu arguments.
type prepared struct {
	dir      string
	nonce    string
	qemuArgs []string
	outLog   string
	conLog   string
}

func (r Run) logf(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "mdvm: "+format+"\n", args...)
	}
}

func (r Run) prepare(dir string) (*prepared, error) {
	if len(r.Disks) > 26 {
		return nil, errors.New("at most 26 disks")
	}
	k, err := pickKernel(r.Kernel)
	if err != nil {
		return nil, err
	}
	s := buildSpec{k: k, modules: r.Modules}
	if s.modules == nil {
		s.modules = strings.Fields(os.Getenv("MDVM_EXTRA_MODULES"))
	}
	if s.busybox, err = findBusybox(); err != nil {
		return nil, err
	}
	if s.mdadm, err = findMdadm(); err != nil {
		return nil, err
	}
	for _, b := range r.Bins {
		p, err := filepath.EvalSymlinks(b)
		if err != nil {
			return nil, fmt.Errorf("bin %s: %w", b, err)
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		s.bins = append(s.bins, p)
	}
	base, err := initramfs(s, r.Rebuild, r.logf)
	if err != nil {
		return nil, err
	}
	kimg := bootImage(k, r.logf)

	var nb [8]byte
	rand.Read(nb[:])
	p := &prepared{dir: dir, nonce: hex.EncodeToString(nb[:]),
		outLog: filepath.Join(dir, "out.log"), conLog: filepath.Join(dir, "console.log")}
	host := r.Hostname
	if host == "" {
		host = "mdvm"
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	cfg := fmt.Sprintf("MDVM_NONCE=%s\nMDVM_NDISKS=%d\nMDVM_SHARE=%d\nMDVM_KLOG=%d\nMDVM_TRACE=%d\nMDVM_HOSTNAME=%s\n",
		p.nonce, len(r.Disks), b2i(r.Share != ""), b2i(r.KLog != ""), b2i(r.Trace), host)
	script := r.Script
	if !strings.HasSuffix(script, "\n") {
		script += "\n"
	}
	extra := newArchive()
	extra.file("mdvm/cmds.sh", 0o644, []byte(script))
	extra.file("mdvm/config", 0o644, []byte(cfg))
	initrd := filepath.Join(dir, "initrd")
	err = writeAtomic(initrd, func(w io.Writer) error {
		f, err := os.Open(base)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		// the kernel unpacks concatenated archives in turn
		z, _ := gzip.NewWriterLevel(w, 1)
		if err := extra.writeTo(z); err != nil {
			return err
		}
		return z.Close()
	})
	if err != nil {
		return nil, err
	}

	mem := r.Mem
	if mem <= 0 {
		mem = 1024
	}
	smp := r.SMP
	if smp <= 0 {
		smp = 2
	}
	// TCG always: on these machines /dev/kvm exists but KVM guests hang.
	accel := "tcg,thread=multi"
	if v := os.Getenv("MDVM_ACCEL"); v != "" && v != "tcg" {
		accel = v
	}
	q := []string{"-nographic", "-nodefaults", "-no-user-config", "-no-reboot",
		"-machine", "pc", "-accel", accel, "-cpu", "max", "-smp", strconv.Itoa(smp), "-m", strconv.Itoa(mem),
		"-kernel", kimg, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=4 panic=-1 8250.nr_uarts=2 mitigations=off random.trust_cpu=on tsc=reliable no_timer_check rdinit=/init",
		"-monitor", "none",
		"-serial", "file:" + p.conLog, "-serial", "file:" + p.outLog}
	for i, d := range r.Disks {
		abs, err := filepath.Abs(d.Path)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		opt := ""
		switch d.Mode {
		case COW:
			opt = ",snapshot=on"
		case RO:
			opt = ",readonly=on"
		}
		q = append(q,
			"-drive", fmt.Sprintf("file=%s,format=raw,if=none,id=d%d,cache=unsafe%s", strings.ReplaceAll(abs, ",", ",,"), i, opt),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=d%d,serial=mdvm-disk%d", i, i))
	}
	if r.Share != "" {
		abs, err := filepath.Abs(r.Share)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("share dir %s not found", r.Share)
		}
		q = append(q, "-fsdev", "local,id=fs0,path="+strings.ReplaceAll(abs, ",", ",,")+",security_model=none",
			"-device", "virtio-9p-pci,fsdev=fs0,mount_tag=mdvmshare")
	}
	p.qemuArgs = q
	return p, nil
}

// execBuiltin runs r with the in-repo driver. Boot retries: a guest that
// has not started the commands within the boot timeout ($MDVM_BOOT_TIMEOUT,
// default 90 s) is killed and booted again, up to $MDVM_BOOT_TRIES (3)
// boots; nothing of the script has run then, so the disks are as before.
func (r Run) execBuiltin(ctx context.Context) (Result, error) {
	qemu := os.Getenv("MDVM_QEMU")
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(qemu); err != nil {
		return Result{}, fmt.Errorf("%s not found (apt-get install qemu-system-x86)", qemu)
	}
	dir, err := os.MkdirTemp("", "mdvm-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	p, err := r.prepare(dir)
	if err != nil {
		return Result{}, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	bootTimeout := r.BootTimeout
	if bootTimeout <= 0 {
		bootTimeout = time.Duration(envInt("MDVM_BOOT_TIMEOUT", 90)) * time.Second
	}
	tries := r.BootTries
	if tries <= 0 {
		tries = envInt("MDVM_BOOT_TRIES", 3)
	}
	begin := []byte("__MDVM_BEGIN_" + p.nonce + "__\n")
	var qout bytes.Buffer
	var waitErr error
	timedOut := false
	t0 := time.Now()
	for try := 1; ; try++ {
		os.WriteFile(p.outLog, nil, 0o644)
		os.WriteFile(p.conLog, nil, 0o644)
		qout.Reset()
		rctx, cancel := context.WithTimeout(ctx, timeout)
		cmd := exec.CommandContext(rctx, qemu, p.qemuArgs...)
		cmd.Stdout = &qout
		cmd.Stderr = &qout
		cmd.Env = append(os.Environ(), "TMPDIR="+dir) // snapshot overlays
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			cancel()
			return Result{}, fmt.Errorf("starting %s: %w", qemu, err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		booted, exited := false, false
		bt := bootTimeout
		if try <= len(r.bootTimeouts) && r.bootTimeouts[try-1] > 0 {
			bt = r.bootTimeouts[try-1]
		}
		bootDeadline := time.Now().Add(bt)
		tick := time.NewTicker(200 * time.Millisecond)
	watch:
		for {
			select {
			case waitErr = <-done:
				exited = true
				break watch
			case <-tick.C:
				if fileHas(p.outLog, begin) {
					booted = true
					break watch
				}
				if time.Now().After(bootDeadline) {
					break watch
				}
			}
		}
		tick.Stop()
		if booted {
			waitErr = <-done
			exited = true
		}
		timedOut = rctx.Err() == context.DeadlineExceeded
		cancel()
		if booted || (exited && fileHas(p.outLog, begin)) || ctx.Err() != nil {
			break
		}
		if !exited {
			cmd.Process.Kill()
			<-done
		}
		if try >= tries {
			return Result{Code: 125}, fmt.Errorf("%w: the guest did not boot in %d tries (%v each)\n%s", ErrNoStatus, tries, bootTimeout, p.diag(qout.Bytes()))
		}
		r.logf("guest did not boot within %v (try %d of %d); booting again", bt, try, tries)
	}
	r.logf("VM ran %.1fs", time.Since(t0).Seconds())
	res, ok := p.result()
	if r.KLog != "" {
		p.saveKlog(r.KLog)
	}
	if ok {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if timedOut {
		res.Code = 124
		return res, fmt.Errorf("%w after %v (guest did not finish)\n%s", ErrTimeout, timeout, p.diag(qout.Bytes()))
	}
	res.Code = 125
	return res, fmt.Errorf("%w (qemu: %v)\n%s", ErrNoStatus, waitErr, p.diag(qout.Bytes()))
}

func fileHas(path string, s []byte) bool {
	data, err := os.ReadFile(path)
	return err == nil && bytes.Contains(data, s)
}

// result cuts the commands' output out of the output port: the bytes
// between the begin marker's line and the end marker, then the status.
// ok is false when no status was reported (the output is then what came
// before the end).
func (p *prepared) result() (Result, bool) {
	data, _ := os.ReadFile(p.outLog)
	begin := []byte("__MDVM_BEGIN_" + p.nonce + "__\n")
	end := []byte("__MDVM_END_" + p.nonce + "__\n")
	i := bytes.Index(data, begin)
	if i < 0 {
		return Result{}, false
	}
	data = data[i+len(begin):]
	j := bytes.Index(data, end)
	if j < 0 {
		return Result{Output: data}, false
	}
	res := Result{Output: data[:j]}
	rest := data[j+len(end):]
	const rcp = "__MDVM_RC="
	if !bytes.HasPrefix(rest, []byte(rcp)) {
		return res, false
	}
	rest = rest[len(rcp):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	code, err := strconv.Atoi(string(rest[:n]))
	if err != nil {
		return res, false
	}
	res.Code = code
	return res, true
}

func (p *prepared) console() string {
	data, _ := os.ReadFile(p.conLog)
	return strings.ReplaceAll(string(data), "\r", "")
}

func (p *prepared) saveKlog(path string) {
	con := p.console()
	kb, ke := "__MDVM_KLOG_BEGIN_"+p.nonce+"__\n", "__MDVM_KLOG_END_"+p.nonce+"__"
	if i := strings.Index(con, kb); i >= 0 {
		if j := strings.Index(con[i:], ke); j >= 0 {
			con = con[i+len(kb) : i+j]
		}
	}
	os.WriteFile(path, []byte(con), 0o644)
}

// diag is the tail of qemu's output and of the guest console.
func (p *prepared) diag(qout []byte) string {
	return "---- qemu output:\n" + lastLines(string(qout), 20) + "\n---- guest console (tail):\n" + lastLines(p.console(), 30)
}
