package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// BenchmarkOpenManyPartitions opens a data directory of 2,000 partitions of
// 3 segments each, after a clean stop and after a crash (no clean-shutdown
// markers, recovery points at 0), as a broker's start does.
func BenchmarkOpenManyPartitions(b *testing.B) {
	const partitions, segments = 2000, 3
	root := b.TempDir()
	m, err := OpenManager(root, cacheConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for p := range partitions {
		l, err := m.Create("bench", int32(p), cacheConfig())
		if err != nil {
			b.Fatal(err)
		}
		for i := range segments {
			mustAppend(b, l, batchtest.Make(3, 200, int64(1000+i), byte(i)))
		}
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		b.Run(fmt.Sprintf("clean=%v", clean), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if !clean {
					for p := range partitions {
						dir := filepath.Join(root, TopicPartition{"bench", int32(p)}.String())
						if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
							b.Fatal(err)
						}
						if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
				m, err := OpenManager(root, cacheConfig(), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
