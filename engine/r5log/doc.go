// Package r5log implements the on-disk format of the md raid4/5/6 write
// journal (the "r5l" log of drivers/md/raid5-cache.c) and a pure model of
// what Linux 6.1 does with it: how it lays out io_units while writing, and
// what its recovery reads, replays and writes when the array starts.
// The package does no I/O of its own and imports only the standard
// library; the engine supplies a reader for the log area and the array's
// sector mapping.
//
// # Format
//
// The log area of the journal member starts at its data_offset and is
// data_size sectors long (rdev->sectors); the ring used is that rounded
// down to 8 sectors (log->device_size). Positions are sectors relative to
// data_offset and wrap at the ring size with a single subtraction
// (r5l_ring_add). An io_unit is a 4 KiB meta block followed by the 4 KiB
// pages its payloads describe, in payload order. A meta block is
// struct r5l_meta_block (little endian): magic 0x6433c509 at 0, checksum at
// 4, version 1 at 8, two zero pad fields, meta_size at 12 (bytes used:
// 32 + payloads), seq at 16, position at 24 (the block's own sector), then
// payloads from 32: DATA/PARITY = type u16, flags u16, size u32 (sectors,
// 8 per page), location u64, one u32 checksum per page; FLUSH = type,
// flags, size u32 (bytes), then size/8 u64 stripe sectors. The checksum of
// a meta block is crc32c_le(seed, whole 4 KiB block with the checksum
// field zero); a page's checksum is crc32c_le(seed, page); seed =
// crc32c_le(~0, set_uuid, 16). crc32c_le is the raw CRC-32C register
// update without the usual inversions (Checksum documents the relation to
// hash/crc32).
//
// # Writing (write-through)
//
// r5l_write_stripe logs a stripe once its parity is computed: one DATA
// payload per data page being written (ascending member index; location =
// the page's array sector; size 8), then one PARITY payload (location =
// sh->sector, size 8 with P's checksum, or 16 with P's and Q's on raid6),
// the pages following in the same order. Stripes handled in one raid5d
// pass share the io_unit; a new meta block is started when the stripe's
// reservation (20 bytes per data page + 16 + 4 per parity page, even when
// no parity is logged) does not fit in the current one. Writer and BuildIO
// reproduce this byte for byte (tested against every io_unit in the
// fixtures). Resync and recovery writes are never logged (r5l_write_stripe
// returns -EAGAIN for STRIPE_SYNCING stripes and for stripes whose parity
// is not being written), 6.1 never sets any payload flag, and raid5 only
// accepts discards at all with the devices_handle_discard_safely module
// parameter (default off).
//
// Flushes in write-through mode (r5l_handle_flush_request): an empty
// REQ_PREFLUSH bio completes at once, and a PREFLUSH with data loses the
// flag and is handled as a plain write, because every io_unit is durable in
// the log before its stripes go to the members: if the journal device has
// a volatile write cache, the kernel sends it a PREFLUSH after the
// io_unit's write completes and only then releases the stripes
// (r5l_flush_stripe_to_raid). Log writes carry neither PREFLUSH nor FUA in
// write-through; REQ_FUA of a bio only makes the member writes FUA. In
// write-back mode an empty flush becomes a meta-only io_unit written with
// PREFLUSH, and data with FUA makes its io_unit PREFLUSH|FUA.
//
// # Recovery (Scan)
//
// At array start (raid5_start -> r5l_start -> r5l_load_log):
//
//  1. journal_tail from the journal member's superblock is used if it is
//     below rdev->sectors and a multiple of 8, else 0.
//  2. The block there must have the right magic and version, a correct
//     checksum and position == journal_tail; its seq and meta_size are not
//     checked. If not, the log is started afresh (Plan.Fresh): no
//     recovery at all, an empty meta block at position 0 with a random
//     32-bit seq R (FUA), journal_tail = 0, next io_unit at sector 8 with
//     seq R+1.
//  3. Otherwise the scan starts there with the block's seq. A meta block
//     is valid when magic, seq (== expected), version and position
//     (== expected) match, its checksum is right and meta_size <= 4096.
//     The first invalid one ends the log.
//  4. Every payload of a valid block is verified first: DATA and PARITY
//     must fit in meta_size and the first page's checksum must match
//     (only checksum[0] for DATA, whatever its size; for PARITY on raid6
//     also the second page against checksum[1]); FLUSH must fit; any other
//     type fails. If anything fails, none of the block's payloads is used
//     and the scan goes on at the block right after the meta block with
//     seq+1 — normally a data page, so the log ends there (one block past
//     the dropped meta block, not at it).
//  5. Then the payloads are applied in order to a list of stripes
//     (ordered by first appearance). DATA: the stripe is looked up by the
//     stripe sector the mapping gives; if it already has parity and is not
//     "data-only", it is written to the members now (replayed), reset and
//     moved to the end of the list; then the page is loaded (a later page
//     for the same member replaces an earlier one) and the stripe becomes
//     data-only. PARITY: P (and Q at the next block on raid6) is loaded and
//     the stripe stops being data-only. FLUSH: each listed stripe found in
//     the list is dropped without being written. The next meta block is
//     expected 8 sectors per DATA payload and 8*max_degraded per PARITY
//     payload after the meta block (+8), regardless of the payload sizes.
//  6. At the end, stripes that are not data-only are written in list
//     order; a stripe without any data page is skipped silently (its data
//     reached the members before the crash). Each write is the whole 4 KiB
//     of each flagged member, ascending member index, to member sector
//     sh->sector. The data-only stripes remain (write-back mode).
//  7. The stripe cache is finite (256 stripes by default, 8 hash buckets of
//     32 by stripe sector): when a new stripe's bucket is full, all
//     non-data-only stripes in the list are replayed first; if that frees
//     nothing the cache is doubled (up to 32768, else recovery fails with
//     -ENOMEM). Params.StripeCache models this. The kernel returns
//     released stripes to the cache through raid5d asynchronously; the
//     model assumes they are free at once.
//
// Afterwards (r5l_recovery_log), with E the position where the scan ended
// and S the seq the next block would have had:
//
//   - It logs "md/raid:mdX: recovering D data-only stripes and P
//     data-parity stripes", or "starting from clean shutdown" when both are
//     0 (Plan.Message).
//   - Without data-only stripes: an empty meta block (meta_size 32) at E
//     with seq S+10000, written with REQ_FUA; new io_units start at E+8
//     with seq S+10001. The +10000 keeps a later recovery that starts at
//     the old tail from accepting stale blocks after E whose seq happens to
//     continue the chain.
//   - With data-only stripes: each is rewritten into the log from E on
//     (Plan.Rewrites): a meta block at the current position with the
//     current seq (S+10000, S+10001, ...) holding one DATA payload per
//     page in descending member index, the pages in the following blocks
//     (each page written first, the meta block last with FUA), the next
//     stripe right after. No empty meta block is written. New io_units
//     start after the last rewritten stripe (Plan.LogStart).
//   - journal_tail becomes E in both cases (r5l_write_super: it only sets
//     rdev->journal_tail and MD_SB_CHANGE_DEVS; the md thread writes the
//     superblock soon after, and md_update_sb with MD_SB_CHANGE_DEVS always
//     increments events).
//   - Data-only stripes are then written out through the normal
//     write-back path, with the journal temporarily in write-back mode:
//     their parity is computed (reading the other members as needed),
//     logged as PARITY-only io_units after the rewritten blocks, the
//     members are written, and a FLUSH payload per stripe follows; then
//     the mode returns to write-through. The grouping of those io_units
//     depends on timing.
//
// # Superblock interplay
//
// With a journal, md keeps resync_offset at MaxSector while the array is
// dirty, provided the array was clean when it started (raid5_run sets
// MD_JOURNAL_CLEAN once, if recovery_cp == MaxSector; super_1_sync then
// writes resync_offset = MaxSector instead of 0 while !in_sync). A crash
// then causes no resync: the journal replay restores parity. An array that
// started with a resync pending (e.g. raid6 created with its initial
// resync running) does not get MD_JOURNAL_CLEAN for that whole run, even
// after the resync finishes: its dirty superblocks say resync_offset 0 and
// a crash leads to a full resync after the replay (fixture F2).
//
// journal_tail advances only in r5l_do_reclaim (the reclaim thread; it
// also runs every 30 s, but moves the tail only when the reclaimable space
// exceeds max_free_space = min(ring/4, 10 GiB), when a space target was
// requested — log full, or quiesce, which asks for everything (array
// stop, suspend, journal mode change) — or when stripes wait for log
// space): write-through moves it to the start of the newest io_unit whose
// stripes, and those of all io_units before it, have reached the members;
// write-back to the log position of the oldest stripe still cached. Each
// move sets MD_SB_CHANGE_DEVS, so the next superblock write bumps events;
// if the journal device supports discard, the superblock is written at
// once and the freed range discarded.
package r5log
