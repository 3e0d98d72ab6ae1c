package probe

import (
	"bytes"
	"testing"
)

func BenchmarkProbe128K(b *testing.B) {
	data := make([]byte, 128<<10)
	for i := 0; i < b.N; i++ {
		if _, err := Probe(bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProbe64M(b *testing.B) {
	dev := newSparse(64 * mib)
	for i := 0; i < b.N; i++ {
		if _, err := Probe(dev, 64*mib); err != nil {
			b.Fatal(err)
		}
	}
}
