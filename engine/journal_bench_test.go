package engine

import (
	"testing"
)

// BenchmarkJournal writes a raid5 and a raid6 with a write journal and the
// same array without one, side by side in alternating batches: full
// stripes in sequence (256K, a multiple of the stripe) and 4 KiB at
// random. The journal doubles what goes to the devices (every page goes
// to the log first) and adds a flush of the journal per request (one per
// batch of concurrent requests): x_plain is the journaled array's time
// over the plain one's (memory devices, so this is the CPU cost: page
// checksums, meta blocks, the copy into the log write).
func BenchmarkJournal(b *testing.B) {
	for _, base := range []spec{
		{level: "raid5", n: 5, chunkKiB: 64, devMiB: []int{64}},
		{level: "raid6", n: 6, chunkKiB: 64, devMiB: []int{64}},
	} {
		for _, op := range []benchOp{{name: "seq256k", size: 256 << 10, write: true}, {name: "rand4k", size: 4 << 10, write: true, rand: true}} {
			b.Run(base.level+"/"+op.name, func(b *testing.B) {
				plain, _ := benchArray(b, base)
				defer plain.Close()
				js := base
				js.journal = true
				jnl, _ := benchArray(b, js)
				defer jnl.Close()
				if jnl.jnl == nil {
					b.Fatal("no journal")
				}
				p := make([]byte, op.size)
				s0, s1 := newOpStream(op, plain.Size()), newOpStream(op, jnl.Size())
				b.SetBytes(op.size)
				b.ResetTimer()
				d0, d1 := alternate(b, 16,
					func(n int) error { return s0.run(n, p, arrayRW(plain)) },
					func(n int) error { return s1.run(n, p, arrayRW(jnl)) })
				reportSideBySide(b, d0, d1, op.size, "x_plain", "plain_MB/s", false)
			})
		}
	}
}

// BenchmarkJournalWriteBack writes two journaled arrays side by side, one
// in write-back mode and one in write-through: x_wt is write-back's time
// over write-through's. Write-back logs each page twice (its data when
// written, again with the column's parity when written out) and copies
// it into the cache; on memory devices that is its whole cost, while on
// disks a small write completes after one log write instead of the
// member reads and writes.
func BenchmarkJournalWriteBack(b *testing.B) {
	for _, base := range []spec{
		{level: "raid5", n: 5, chunkKiB: 64, devMiB: []int{64}, journal: true},
		{level: "raid6", n: 6, chunkKiB: 64, devMiB: []int{64}, journal: true},
	} {
		for _, op := range []benchOp{{name: "seq256k", size: 256 << 10, write: true}, {name: "rand4k", size: 4 << 10, write: true, rand: true}} {
			b.Run(base.level+"/"+op.name, func(b *testing.B) {
				wt, _ := benchArray(b, base)
				defer wt.Close()
				wb, _ := benchArray(b, base)
				defer wb.Close()
				if err := wb.SetJournalMode(JournalWriteBack); err != nil {
					b.Fatal(err)
				}
				p := make([]byte, op.size)
				s0, s1 := newOpStream(op, wt.Size()), newOpStream(op, wb.Size())
				b.SetBytes(op.size)
				b.ResetTimer()
				d0, d1 := alternate(b, 16,
					func(n int) error { return s0.run(n, p, arrayRW(wt)) },
					func(n int) error { return s1.run(n, p, arrayRW(wb)) })
				reportSideBySide(b, d0, d1, op.size, "x_wt", "wt_MB/s", false)
			})
		}
	}
}
