package embedded

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"millrace/broker/coord"
)

// BenchmarkSet measures durable Set throughput, the load consumer-offset
// commits put on the store: one setter (an fsync per Set) and eight
// concurrent setters on separate sessions (sharing fsyncs by group commit).
func BenchmarkSet(b *testing.B) {
	for _, setters := range []int{1, 8} {
		b.Run(fmt.Sprintf("setters-%d", setters), func(b *testing.B) {
			s, err := Open(b.TempDir(), testLogger())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sessions := make([]coord.Store, setters)
			for i := range sessions {
				if sessions[i], err = s.Session(); err != nil {
					b.Fatal(err)
				}
				if _, err := sessions[i].Create("/offset-"+strconv.Itoa(i), nil, coord.Persistent); err != nil {
					b.Fatal(err)
				}
			}
			data := []byte(`{"offset":1234567,"metadata":""}`)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, c := range sessions {
				n := b.N / setters
				if i < b.N%setters {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					path := "/offset-" + strconv.Itoa(i)
					for j := 0; j < n; j++ {
						if _, err := c.Set(path, data, coord.AnyVersion); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
