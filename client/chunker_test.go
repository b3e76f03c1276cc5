package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/cdc"
)

// updateVectors rewrites testdata/chunking/vectors.json from the current
// chunker: go test -run TestChunkVectors ./client/ -update-chunk-vectors
// Only for a deliberate change of the chunking specification, which every
// SDK then has to follow.
var updateVectors = flag.Bool("update-chunk-vectors", false, "rewrite testdata/chunking/vectors.json")

const vectorsPath = "../testdata/chunking/vectors.json"

// chunkVectors is the layout of testdata/chunking/vectors.json, which the
// Python and TypeScript SDKs' tests read too.
type chunkVectors struct {
	About      []string      `json:"about"`
	MinSize    int           `json:"min_size"`
	NormalSize int           `json:"normal_size"`
	MaxSize    int           `json:"max_size"`
	MaskS      string        `json:"mask_s"`
	MaskL      string        `json:"mask_l"`
	GearLabel  string        `json:"gear_label"`
	GearFirst  []string      `json:"gear_first"`  // G[0..15]
	GearSHA256 string        `json:"gear_sha256"` // of G[0..255], each as 8 little-endian bytes
	Vectors    []chunkVector `json:"vectors"`
}

type chunkVector struct {
	Name   string      `json:"name"`
	Parts  []inputPart `json:"parts"`
	Length int         `json:"length"`
	SHA256 string      `json:"sha256"`
	// ResyncsWith names a vector whose input is this one's without a
	// prefix: all but its first chunks must be among this one's.
	ResyncsWith string     `json:"resyncs_with,omitempty"`
	Chunks      []chunkRef `json:"chunks"`
}

// inputPart is a piece of a vector's input, which is its parts joined:
// "sha256ctr" is the bytes of SHA-256(seed || uint64_le(k)) for k = 0, 1,
// 2, ..., joined and cut to Length; "fill" is Length copies of Byte.
type inputPart struct {
	Kind   string `json:"kind"`
	Seed   string `json:"seed,omitempty"`
	Byte   int    `json:"byte,omitempty"`
	Length int    `json:"length"`
}

type chunkRef struct {
	Offset int    `json:"offset"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// vectorInputs are the inputs the vectors cover, for -update-chunk-vectors.
var vectorInputs = []chunkVector{
	{Name: "empty", Parts: []inputPart{}},
	{Name: "below-min", Parts: []inputPart{ctr("below-min", 100_000)}},
	{Name: "exactly-min", Parts: []inputPart{ctr("exactly-min", cdc.MinSize)}},
	{Name: "min-plus-one", Parts: []inputPart{ctr("min-plus-one", cdc.MinSize+1)}},
	{Name: "max-plus-one", Parts: []inputPart{ctr("max-plus-one", cdc.MaxSize+1)}},
	{Name: "random-10mib", Parts: []inputPart{ctr("random-10mib", 10<<20+12_345)}},
	{Name: "prefix-inserted", ResyncsWith: "random-10mib",
		Parts: []inputPart{ctr("inserted-prefix", 1000), ctr("random-10mib", 10<<20+12_345)}},
	{Name: "one-byte-run", Parts: []inputPart{{Kind: "fill", Byte: 0, Length: 9<<20 + 1000}}},
	{Name: "mixed-runs", Parts: []inputPart{ctr("mixed-runs", 3<<19), {Kind: "fill", Byte: 'a', Length: 6 << 20},
		ctr("mixed-runs-tail", 2<<20)}},
}

func ctr(seed string, n int) inputPart { return inputPart{Kind: "sha256ctr", Seed: seed, Length: n} }

// vectorInput builds a vector's input from its parts.
func vectorInput(t testing.TB, parts []inputPart) []byte {
	var b []byte
	for _, p := range parts {
		switch p.Kind {
		case "sha256ctr":
			msg := append([]byte(p.Seed), make([]byte, 8)...)
			start := len(b)
			for k := uint64(0); len(b)-start < p.Length; k++ {
				binary.LittleEndian.PutUint64(msg[len(p.Seed):], k)
				sum := sha256.Sum256(msg)
				b = append(b, sum[:min(len(sum), p.Length-(len(b)-start))]...)
			}
		case "fill":
			b = append(b, bytes.Repeat([]byte{byte(p.Byte)}, p.Length)...)
		default:
			t.Fatalf("unknown part kind %q", p.Kind)
		}
	}
	return b
}

func hexSHA256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// splitRefs cuts r with SplitChunks and describes the chunks.
func splitRefs(t testing.TB, r io.Reader) []chunkRef {
	refs := []chunkRef{}
	off := 0
	if err := client.SplitChunks(r, func(c []byte) error {
		refs = append(refs, chunkRef{Offset: off, Size: len(c), SHA256: hexSHA256(c)})
		off += len(c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return refs
}

func gearFacts() (first []string, sum string) {
	g := cdc.Gear()
	var all []byte
	for i, v := range g {
		if i < 16 {
			first = append(first, fmt.Sprintf("0x%016x", v))
		}
		all = binary.LittleEndian.AppendUint64(all, v)
	}
	return first, hexSHA256(all)
}

// shortReader hands out its bytes in reads of varying small sizes.
type shortReader struct {
	r     io.Reader
	calls int
}

func (s *shortReader) Read(p []byte) (int, error) {
	s.calls++
	n := 1 + s.calls*7919%70_000
	return s.r.Read(p[:min(len(p), n)])
}

// TestChunkVectors checks the chunker against the committed vectors that
// every SDK's tests read: the specification's parameters, masks and gear
// table first, then each input's chunks, read whole and in short reads.
func TestChunkVectors(t *testing.T) {
	first, gearSum := gearFacts()
	if *updateVectors {
		writeChunkVectors(t, first, gearSum)
	}
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var v chunkVectors
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.MinSize != client.ChunkMinSize || v.NormalSize != client.ChunkAvgSize || v.MaxSize != client.ChunkMaxSize {
		t.Fatalf("sizes %d/%d/%d in the vectors, %d/%d/%d in the chunker", v.MinSize, v.NormalSize, v.MaxSize,
			client.ChunkMinSize, client.ChunkAvgSize, client.ChunkMaxSize)
	}
	if ms, ml := fmt.Sprintf("0x%016x", cdc.MaskS), fmt.Sprintf("0x%016x", cdc.MaskL); v.MaskS != ms || v.MaskL != ml {
		t.Fatalf("masks %s/%s in the vectors, %s/%s in the chunker", v.MaskS, v.MaskL, ms, ml)
	}
	if v.GearLabel != cdc.GearLabel || strings.Join(v.GearFirst, ",") != strings.Join(first, ",") || v.GearSHA256 != gearSum {
		t.Fatalf("gear table differs from the vectors': first entries %v, want %v; digest %s, want %s",
			first, v.GearFirst, gearSum, v.GearSHA256)
	}
	if len(v.Vectors) < len(vectorInputs) {
		t.Fatalf("%d vectors, want %d", len(v.Vectors), len(vectorInputs))
	}
	byName := map[string]chunkVector{}
	for _, vec := range v.Vectors {
		byName[vec.Name] = vec
	}
	for _, vec := range v.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			data := vectorInput(t, vec.Parts)
			if len(data) != vec.Length || hexSHA256(data) != vec.SHA256 {
				t.Fatalf("input: %d bytes, sha256 %s; the vector says %d, %s", len(data), hexSHA256(data), vec.Length, vec.SHA256)
			}
			want, _ := json.Marshal(vec.Chunks)
			readers := map[string]io.Reader{"whole": bytes.NewReader(data), "short reads": &shortReader{r: bytes.NewReader(data)}}
			if len(data) <= cdc.MaxSize+1 {
				readers["one byte a read"] = iotest.OneByteReader(bytes.NewReader(data))
			}
			for how, r := range readers {
				if got, _ := json.Marshal(splitRefs(t, r)); !bytes.Equal(got, want) {
					t.Errorf("%s: got chunks\n%s\nwant\n%s", how, got, want)
				}
			}
			if vec.ResyncsWith != "" {
				other, ok := byName[vec.ResyncsWith]
				if !ok {
					t.Fatalf("resyncs_with %q: no such vector", vec.ResyncsWith)
				}
				have := map[string]bool{}
				for _, c := range vec.Chunks {
					have[c.SHA256] = true
				}
				missing := 0
				for _, c := range other.Chunks {
					if !have[c.SHA256] {
						missing++
					}
				}
				if missing > 2 || len(other.Chunks) < 4 {
					t.Errorf("%d of %s's %d chunks are not among this input's", missing, other.Name, len(other.Chunks))
				}
			}
		})
	}
}

func writeChunkVectors(t *testing.T, first []string, gearSum string) {
	v := chunkVectors{
		About: []string{
			"Baton's content-defined chunking test vectors, read by every SDK's tests.",
			"The specification is the package doc of client/internal/cdc (Go).",
			"Each vector's input is its parts joined: sha256ctr = SHA-256(seed_utf8 || uint64_le(k)) for k = 0, 1, 2, ... joined and cut to length; fill = length copies of byte.",
			"gear_first holds G[0..15]; gear_sha256 is SHA-256 of G[0..255], each as 8 little-endian bytes.",
			"chunks: offset and size in the input, and the chunk's SHA-256 (hex).",
			"Rewritten only by: go test -run TestChunkVectors ./client/ -update-chunk-vectors",
		},
		MinSize: cdc.MinSize, NormalSize: cdc.NormalSize, MaxSize: cdc.MaxSize,
		MaskS: fmt.Sprintf("0x%016x", cdc.MaskS), MaskL: fmt.Sprintf("0x%016x", cdc.MaskL),
		GearLabel: cdc.GearLabel, GearFirst: first, GearSHA256: gearSum,
	}
	for _, vec := range vectorInputs {
		data := vectorInput(t, vec.Parts)
		vec.Length, vec.SHA256 = len(data), hexSHA256(data)
		vec.Chunks = splitRefs(t, bytes.NewReader(data))
		v.Vectors = append(v.Vectors, vec)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(vectorsPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsPath, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
