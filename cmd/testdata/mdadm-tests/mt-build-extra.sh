# Not one of mdadm's tests: arrays built without superblocks (-B), the
# parts 05r1-re-add-nosuper does not reach (issue 16, build). mdadm 4.2's
# Build opens every member before it creates a missing bitmap file
# (CreateBitmap) and leaves the file when RUN_ARRAY then fails; its raid10
# file is sized from one member ("FIXME wrong for RAID10"); a file it did
# not create is taken as it is (a bad header: EINVAL). --write-behind needs
# a bitmap (mdadm.c) and goes into a file Build creates; -W marks the
# members after it write-mostly. --re-add without a bitmap puts the member
# back into the free slot with MD_DISK_SYNC: md's raid1/raid10 shortcut
# then skips the whole recovery (scribble writes behind the array while the
# member is out, so cmpdevs says whether anything was copied back). --add
# is a plain ADD_NEW_DISK: a spare that recovers the missing slot. The
# bitmap file's presence is a logged step (bmfexists).
cmpdevs() {
	for d in "$1" "$2"; do blockdev --flushbufs "$d" >/dev/null 2>&1; done # loop devices: drop cached pages
	cmp "$1" "$2" >/dev/null 2>&1
	rc=$?
	printf '### cmp %s %s\n--- rc=%s\n' "$1" "$2" "$rc" >>"$LOG"
}
bmfexists() {
	rc=1
	[ -e "$bmf" ] && rc=0
	printf '### exists bmf\n--- rc=%s\n' "$rc" >>"$LOG"
}
scribble() {
	seq 1 20000 | head -c 65536 | dd of="$1" bs=65536 seek=4 count=1 conv=notrunc 2>/dev/null
}

rm -f $bmf
mdadm -B $md0 -l1 -n2 --write-behind=256 $dev0 -W $dev1

# a busy member: refused before the bitmap file is created
mdadm -B $md0 -l1 -n2 --assume-clean $dev0 $dev1
mdadm -B $md1 -l1 -n2 -b$bmf $dev1 $dev2
bmfexists
quiet -S $md0

# raid10 without -c: Build gives md chunk 0, which raid10 refuses after
# the file was created; the file stays. With a chunk, the file (now used
# as it is) is too short
mdadm -B $md0 -l10 -n4 --assume-clean -b$bmf $dev0 $dev1 $dev2 $dev3
bmfexists
mdadm -X $bmf
mdadm -B $md0 -l10 -n4 -c64 --assume-clean -b$bmf $dev0 $dev1 $dev2 $dev3
# a chunk that is no power of 2: mdadm's hint after RUN_ARRAY fails
mdadm -B $md0 -l10 -n2 -c12 --assume-clean $dev0 $dev1
# a file that is no bitmap
dd if=/dev/zero of=$bmf bs=4096 count=1 2>/dev/null
mdadm -B $md0 -l1 -n2 --assume-clean -b$bmf $dev0 $dev1
rm -f $bmf

# raid0 and linear take no spare (md: EINVAL)
mdadm -B $md0 -l0 -n2 $dev0 $dev1
mdadm $md0 --add $dev2
quiet -S $md0
mdadm -B $md0 -llinear -n2 $dev0 $dev1
mdadm $md0 --add $dev2
mdadm -D $md0
quiet -S $md0

# --re-add without a bitmap: md skips the recovery
for l in 1 10; do
	mdadm -B $md0 -l$l -n2 -c64 --assume-clean $dev0 $dev1
	mdadm $md0 --fail $dev1
	sleep 1
	mdadm $md0 --remove $dev1
	scribble $dev1
	mdadm $md0 --re-add $dev1
	settle $md0
	cmpdevs $dev0 $dev1
	mdadm -S $md0
done

# grow on built arrays: an internal bitmap needs a superblock (mdadm's
# load_super fails: nothing written), there is none to remove, a bitmap
# file needs the array's UUID; --add-spare; more mirrors: the spare added
# -W recovers the new slot. A bitmap file Build gave is let go by
# --bitmap=none (SET_BITMAP_FILE -1), and a second one finds none.
mdadm -B $md0 -l0 -n2 $dev0 $dev1
mdadm -G $md0 --bitmap=internal
quiet -S $md0
mdadm -B $md0 -l1 -n2 --assume-clean $dev0 $dev1
mdadm -G $md0 --bitmap=internal
mdadm -G $md0 --bitmap=none
mdadm -G $md0 --bitmap=$bmf
mdadm $md0 --add-spare $dev2
mdadm $md0 --fail $dev1
settle $md0
mdadm $md0 --remove $dev1
mdadm $md0 --add -W $dev1
mdadm -D $md0
mdadm -G $md0 -n3
settle $md0
mdadm -D $md0
cmpdevs $dev0 $dev1
mdadm -S $md0
rm -f $bmf
mdadm -B $md0 -l1 -n2 --assume-clean -b$bmf $dev0 $dev1
mdadm -G $md0 --bitmap=internal
mdadm -G $md0 --bitmap=none
mdadm -G $md0 --bitmap=none
mdadm -S $md0
rm -f $bmf

# --size at build: raid1/raid10 use the smaller of it and the smallest
# member, raid0 and linear the whole members. grow --size and
# --array-size on a built raid1 (nothing to record them in). A bitmap
# file Build creates with --size is sized from the KiB taken as bytes
# (Build.c's FIXME): too small, RUN_ARRAY fails and the file stays.
mdadm -B $md0 -l1 -n2 --assume-clean -z 16000 $dev0 $dev1
mdadm -D $md0
mdadm -G $md0 --size=max
settle $md0
mdadm -D $md0
mdadm -G $md0 -z 12000
mdadm -G $md0 --array-size=10000
mdadm -D $md0
mdadm -S $md0
mdadm -B $md0 -l0 -n2 -z 12000 $dev0 $dev1
mdadm -D $md0
mdadm -G $md0 --size=max
mdadm -S $md0
rm -f $bmf
mdadm -B $md0 -l1 -n2 --assume-clean -z 16000 -b$bmf $dev0 $dev1
mdadm -X $bmf
rm -f $bmf

# write-behind and write-mostly with a bitmap file Build creates; --add
# of a spare into the failed member's slot
mdadm -B $md0 -l1 -n2 --assume-clean -b$bmf -d1 --write-behind=100 $dev0 -W $dev1
mdadm -X $bmf
mdadm $md0 --fail $dev0
sleep 1
mdadm $md0 --remove $dev0
writedata $md0
mdadm $md0 --add $dev2
settle $md0
mdadm -D $md0
mdadm -S $md0
