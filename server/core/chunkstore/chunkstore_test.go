package chunkstore

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPutGetRoundTrip(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionZstd} {
		t.Run(string(c), func(t *testing.T) { testPutGetRoundTrip(t, c) })
	}
}

func testPutGetRoundTrip(t *testing.T, c Compression) {
	s, err := Open(t.TempDir(), WithCompression(c))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	random := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(random)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"compressible", bytes.Repeat([]byte("baton "), 100_000)},
		{"incompressible", random},
		{"tiny", []byte("x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Digest(tc.body)
			if s.Has(d) {
				t.Fatalf("got Has before Put, want false")
			}
			if err := s.Put(d, tc.body); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(d)
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("got %d bytes, err %v; want the %d bytes put", len(got), err, len(tc.body))
			}
			info, err := os.Stat(s.path(d))
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() > int64(len(tc.body))+1 {
				t.Fatalf("stored %d bytes for a %d byte body; want at most raw+1", info.Size(), len(tc.body))
			}
		})
	}
}

func TestPutRefusesMismatch(t *testing.T) {
	s, _ := Open(t.TempDir())
	defer s.Close()
	if err := s.Put(Digest([]byte("a")), []byte("b")); !errors.Is(err, ErrMismatch) {
		t.Fatalf("got %v, want ErrMismatch", err)
	}
	if s.Has(Digest([]byte("a"))) {
		t.Fatalf("a mismatched body was stored")
	}
}

func TestCorruptCopyIsDetectedAndRemoved(t *testing.T) {
	s, _ := Open(t.TempDir())
	defer s.Close()
	body := []byte("some chunk body that is long enough")
	d := Digest(body)
	if err := s.Put(d, body); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.path(d))
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(s.path(d), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(d); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if s.Has(d) {
		t.Fatalf("the corrupt copy is still there; want it removed so repair refetches it")
	}
}

func TestEmptyChunkAlwaysPresent(t *testing.T) {
	s, _ := Open(t.TempDir())
	defer s.Close()
	if !s.Has(EmptyDigest) || Digest(nil) != EmptyDigest {
		t.Fatalf("empty chunk: Has %v, Digest(nil) %s", s.Has(EmptyDigest), Digest(nil))
	}
	if b, err := s.Get(EmptyDigest); err != nil || len(b) != 0 {
		t.Fatalf("got %q, %v; want empty", b, err)
	}
}

func TestWalkListsBodies(t *testing.T) {
	s, _ := Open(t.TempDir())
	defer s.Close()
	want := map[string]bool{}
	for _, b := range []string{"a", "b", "c"} {
		d := Digest([]byte(b))
		want[d] = true
		if err := s.Put(d, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	if err := s.Walk(func(d string, mod time.Time) { got[d] = !mod.IsZero() }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d bodies, want %d", len(got), len(want))
	}
	for d := range want {
		if !got[d] {
			t.Fatalf("Walk missed %s", d)
		}
	}
}

// A peer stores the form the receiving node encoded (Encode) once it has
// decoded it and checked the digest; the file is that form, byte for byte.
func TestPutEncodedVerifiesAndKeepsTheForm(t *testing.T) {
	s, _ := Open(t.TempDir())
	defer s.Close()
	random := make([]byte, 64<<10)
	rand.New(rand.NewSource(2)).Read(random)
	for _, body := range [][]byte{bytes.Repeat([]byte("baton "), 50_000), random, {}} {
		d := Digest(body)
		data := s.Encode(body)
		if err := s.PutEncoded(d, data, 1<<20); err != nil {
			t.Fatalf("%d byte body: %v", len(body), err)
		}
		got, err := s.Get(d)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d byte body: got %d bytes, err %v", len(body), len(got), err)
		}
		if len(body) == 0 {
			continue // the empty chunk is never written
		}
		if file, _ := os.ReadFile(s.path(d)); !bytes.Equal(file, data) {
			t.Fatalf("%d byte body: the file is not the form sent", len(body))
		}
	}
}

func TestPutEncodedRefusesBadForms(t *testing.T) {
	s, _ := Open(t.TempDir(), WithCompression(CompressionZstd))
	defer s.Close()
	body := bytes.Repeat([]byte("chunk "), 10_000)
	d := Digest(body)
	data := s.Encode(body)
	if data[0] != kindZstd {
		t.Fatalf("a repetitive body was not compressed")
	}
	garbled := append([]byte{}, data...)
	garbled[len(garbled)/2] ^= 0xff
	for name, tc := range map[string]struct {
		digest string
		data   []byte
		max    int64
	}{
		"wrong digest":    {Digest([]byte("other")), data, 1 << 20},
		"garbled":         {d, garbled, 1 << 20},
		"unknown kind":    {d, append([]byte{7}, data[1:]...), 1 << 20},
		"empty form":      {d, nil, 1 << 20},
		"over the limit":  {d, data, int64(len(body)) - 1},
		"raw over limit":  {d, append([]byte{kindRaw}, body...), int64(len(body)) - 1},
		"raw wrong bytes": {d, append([]byte{kindRaw}, body[1:]...), 1 << 20},
	} {
		if err := s.PutEncoded(tc.digest, tc.data, tc.max); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: got %v, want ErrMismatch", name, err)
		}
		if s.Has(tc.digest) {
			t.Errorf("%s: a refused form was stored", name)
		}
	}
}

// The compression only decides how a node writes what it receives from
// clients: a store reads every form whatever its own setting, so a node
// restarted with another --chunk-compression, or given a peer's copy in
// another form, serves every chunk it holds.
func TestCompressionWritesItsFormAndReadsEveryForm(t *testing.T) {
	dir := t.TempDir()
	zs, err := Open(dir, WithCompression(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	defer zs.Close()
	ns, err := Open(dir) // the default: none
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	body := bytes.Repeat([]byte("compressible chunk "), 20_000)
	if data := ns.Encode(body); data[0] != kindRaw || !bytes.Equal(data[1:], body) {
		t.Fatalf("none: the stored form is not the raw body (kind %d, %d bytes)", data[0], len(data))
	}
	zdata := zs.Encode(body)
	if zdata[0] != kindZstd || len(zdata) >= len(body)/2 {
		t.Fatalf("zstd: kind %d, %d bytes for a %d byte repetitive body; want compressed", zdata[0], len(zdata), len(body))
	}
	// A zstd copy received from a peer, then read by the none store.
	d := Digest(body)
	if err := ns.PutEncoded(d, zdata, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, err := ns.Get(d); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("none store reading a zstd file: %d bytes, %v", len(got), err)
	}
	// And the other way round.
	other := append([]byte("raw "), body...)
	od := Digest(other)
	if err := ns.Put(od, other); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(ns.path(od)); info.Size() != int64(len(other))+1 {
		t.Fatalf("none: stored %d bytes for %d; want the raw body and its kind byte", info.Size(), len(other))
	}
	if got, err := zs.Get(od); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("zstd store reading a raw file: %d bytes, %v", len(got), err)
	}
}

func TestParseCompression(t *testing.T) {
	for _, ok := range []string{"none", "zstd"} {
		if c, err := ParseCompression(ok); err != nil || string(c) != ok {
			t.Errorf("%q: got %q, %v", ok, c, err)
		}
	}
	for _, bad := range []string{"", "gzip", "ZSTD"} {
		if _, err := ParseCompression(bad); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
	if _, err := Open(t.TempDir(), WithCompression("lz4")); err == nil {
		t.Errorf("Open with compression lz4: got no error")
	}
}

// Bodies around the direct path's block size are stored whole, to the
// byte, whether the store writes past the page cache or through it.
func TestWritePathsKeepEveryByte(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "buffered"}[buffered], func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.buffered.Store(buffered)
			src := rand.New(rand.NewSource(2))
			for _, n := range []int{1, 4094, 4095, 4096, 8191, 1<<20 + 3} {
				body := make([]byte, n)
				src.Read(body)
				d := Digest(body)
				if err := s.Put(d, body); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				info, err := os.Stat(s.path(d))
				if err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if info.Size() != int64(n)+1 {
					t.Fatalf("%d bytes: stored %d bytes, want %d", n, info.Size(), n+1)
				}
				got, err := s.Get(d)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("%d bytes: got %d bytes back, err %v", n, len(got), err)
				}
			}
			err = filepath.WalkDir(s.dir, func(path string, e fs.DirEntry, err error) error {
				if err == nil && strings.HasPrefix(e.Name(), ".tmp-") {
					t.Errorf("a temporary file left behind: %s", path)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
