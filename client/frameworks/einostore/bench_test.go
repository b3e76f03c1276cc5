package einostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client/frameworks/einostore"
	"github.com/baton-dev/baton/client/frameworks/internal/batontest"
)

// BenchmarkStore measures Set and Get against the test cluster (three
// local nodes): go test -run '^$' -bench Store ./einostore/ in
// client/frameworks. A checkpoint of 10 KB of JSON (a small graph's) set
// on a new thread, on one that has checkpoints, and read back; and one of
// 1 MiB of bytes that are not JSON (base64, through the chunk store).
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	s, err := einostore.New(admin, batontest.Tenant, einostore.Options{Prefix: "bench/"})
	if err != nil {
		b.Fatal(err)
	}
	small, _ := json.Marshal(map[string]string{"v": strings.Repeat("a", 10_000)})
	large := bytes.Repeat([]byte{0xfe, 0x01}, 512<<10)
	run := fmt.Sprint(time.Now().UnixNano())
	b.Run("set-new-thread-10KB", func(b *testing.B) {
		for i := range b.N {
			if err := s.Set(ctx, fmt.Sprintf("%s-new-%d", run, i), small); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set-existing-thread-10KB", func(b *testing.B) {
		for range b.N {
			if err := s.Set(ctx, run+"-existing", small); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get-10KB", func(b *testing.B) {
		for range b.N {
			if _, _, err := s.Get(ctx, run+"-existing"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set-1MiB-binary", func(b *testing.B) {
		b.SetBytes(int64(len(large)))
		for range b.N {
			if err := s.Set(ctx, run+"-large", large); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get-1MiB-binary", func(b *testing.B) {
		b.SetBytes(int64(len(large)))
		for range b.N {
			if _, _, err := s.Get(ctx, run+"-large"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
