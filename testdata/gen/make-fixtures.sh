#!/bin/sh
# Regenerate testdata/fixtures from the real Linux 6.1 md driver and mdadm 4.2
# in the mdvm VM (the in-repo driver internal/mdvm, or the tool named by $MDTOOL_MDVM).
# Needs the host tools mdvm needs (qemu-system-x86, linux-image-amd64, ...)
# plus the host mdadm (for host-examine-*.txt and the trimming check).
#
#   testdata/gen/make-fixtures.sh            # all batches
#   testdata/gen/make-fixtures.sh b1 b2      # only these batches
#   testdata/gen/make-fixtures.sh -work /tmp/w b8   # keep images in /tmp/w
#
# Case definitions: internal/fixture/cmd/mkfx/cases.go.
set -eu
cd "$(dirname "$0")/../.."
export MDVM_ACCEL=tcg   # KVM exists on the build machines but hangs
exec go run ./internal/fixture/cmd/mkfx gen -out testdata/fixtures "$@"
