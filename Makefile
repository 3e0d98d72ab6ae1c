# mdtool Makefile. `make demo` runs the main job on sparse image files;
# `make test` installs what the tests need (Debian, as root) and runs them.

GO      ?= go
BIN     ?= ./mdtool
PKGS    := ./...
DEBS    := qemu-system-x86 mdadm busybox-static cpio linux-image-amd64 linux-image-6.12-amd64 xz-utils fio nbdkit \
           libnbd-bin fuse3 e2fsprogs dosfstools util-linux kmod iproute2
DEMO    ?= /tmp/mdtool-demo

.PHONY: all build test test-short deps check fmt vet docs check-docs fuzz bench bench-reshape bench-nbd bench-doors bench-shim demo clean

all: build

build:
	$(GO) build -o $(BIN) .

# deps installs the Debian packages the tests use (qemu + Linux 6.1, the md
# oracle, and 6.12 for ublk in the VM; mdadm, fio, nbdkit, libnbd, fuse3,
# mkfs tools). The VM driver builds its own initrd from the kernels' modules,
# so INITRD=No skips the host initramfs that each kernel's postinst would
# build (about 80 s each on the CI machine); unsafe-io skips dpkg's fsyncs.
deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && INITRD=No DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends -o Dpkg::Options::=--force-unsafe-io $$missing; \
	fi

# The full suite, including the kernel-oracle tests that boot Linux 6.1 in
# qemu (internal/mdvm, the repository's own VM driver) and fail when that
# oracle is unavailable in CI. Under CI the kernel tests marked
# mdvm.Parallel run two guests at once (MDTOOL_VM_JOBS=1: one at a time).
test: deps check
	$(GO) test -count=1 -timeout 80m $(PKGS)

# Unit tests only: no VM.
test-short:
	$(GO) test -short -count=1 $(PKGS)

check: fmt vet check-docs

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# man/ and completions/ are generated from the command tree and committed.
docs:
	$(GO) run . gendocs man completions

check-docs:
	@tmp=$$(mktemp -d); $(GO) run . gendocs $$tmp/man $$tmp/completions >/dev/null && \
	if diff -r man $$tmp/man >/dev/null && diff -r completions $$tmp/completions >/dev/null; then \
		rm -rf $$tmp; \
	else \
		diff -r man $$tmp/man | head -20; diff -r completions $$tmp/completions | head -20; \
		rm -rf $$tmp; echo "man/ or completions/ is stale: run 'make docs' and commit"; exit 1; \
	fi

# Every fuzz target for FUZZTIME each.
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; \
		done; \
	done

bench:
	$(GO) run ./internal/benchtable

# The issue-14 reshape benchmark (engine/reshape_bench_test.go): reshape
# throughput beside a plain member-to-member copy of the same bytes on the
# same members, and 4 KiB random-write IOPS during a reshape beside IOPS
# without one, on memory members and on the member model; no thresholds.
bench-reshape:
	$(GO) run ./internal/benchtable -pkgs ./engine -bench '^BenchmarkReshape$$' -benchtime 1x

# The issue-4 NBD benchmark: fio 4 KiB randread/randwrite at iodepth 32 and
# 1 MiB sequential write/read through NBD on a unix socket, against the
# `mdtool assemble` daemon serving raid0 over member images on tmpfs, with
# nbdkit's memory plugin as the same-run baseline (target 0.8x).
# NBDBENCH_FLAGS passes options, e.g. NBDBENCH_FLAGS="-runtime 5s -rounds 5".
NBDBENCH_FLAGS ?=
bench-nbd: build
	$(GO) run ./internal/nbdbench/cmd/nbdbench -mdtool $(BIN) $(NBDBENCH_FLAGS)

# The issue-12 door benchmark: in one Linux 6.12 VM run, fio 4 KiB random
# IOPS and 1 MiB sequential MB/s through the kernel md driver (raid10 on 4
# virtio disks), through mdtool serving that array as a ublk device and as a
# kernel NBD device, through the engine alone over ublk, and a raw disk
# against the same disk over ublk: one table, ratios against kernel md.
# MDTOOL_BENCH_RUNTIME=N sets each fio job's seconds (default 8).
bench-doors:
	$(GO) test -run '^$$' -bench '^BenchmarkDoors$$' -benchtime 1x -timeout 60m ./internal/serve/ublkexport

# The device-mapper shim's cost (TestKernelGeometry*, with
# MDTOOL_SHIM_COST set): fio through /dev/md/NAME (dm) and through the door
# below it, in the 6.12 (ublk) and 6.1 (NBD) VMs; COST lines in the log.
bench-shim:
	MDTOOL_SHIM_COST=1 $(GO) test -count=1 -v -run '^TestKernelGeometry' -timeout 60m ./cmd | grep -E ': COST |^(ok|FAIL|---)'

# The main job end to end on sparse image files: create a RAID10 with an
# internal bitmap exactly as the mdadm command line would (which starts
# serving it, as mdadm --create starts the array), show it, stop it, then
# examine the members.
demo: build
	@MDTOOL_RUN_DIR=$(DEMO)/run $(BIN) --stop /dev/md/demo >/dev/null 2>&1 || true
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@for i in 0 1 2 3; do truncate -s 1G $(DEMO)/disk$$i.img; done
	MDTOOL_RUN_DIR=$(DEMO)/run $(BIN) --create /dev/md/demo --run --level=10 --raid-devices=4 --bitmap=internal \
		--bitmap-chunk=64M --homehost=demo $(DEMO)/disk0.img $(DEMO)/disk1.img $(DEMO)/disk2.img $(DEMO)/disk3.img
	MDTOOL_RUN_DIR=$(DEMO)/run $(BIN) --detail /dev/md/demo
	MDTOOL_RUN_DIR=$(DEMO)/run $(BIN) --stop /dev/md/demo
	$(BIN) --examine $(DEMO)/disk0.img
	$(BIN) -X $(DEMO)/disk0.img
	$(BIN) --examine --scan --config=none $(DEMO)/disk*.img
	@if command -v mdadm >/dev/null; then echo "== host mdadm 4.2 reads it:"; mdadm --examine $(DEMO)/disk0.img | grep -E 'Checksum|Raid Level|Layout'; fi

clean:
	rm -f $(BIN)
