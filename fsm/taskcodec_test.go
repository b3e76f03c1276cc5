package fsm

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// reflectEncode and reflectDecode are the reflection codec, which the
// hand-written one must match byte for byte.
func reflectEncode(t *testing.T, v any) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, mh).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b
}

func reflectDecodeTask(b []byte) (*Task, error) {
	var tk Task
	err := codec.NewDecoderBytes(b, mh).Decode(&tk)
	return &tk, err
}

// edgeLens are the lengths where msgpack changes header.
var edgeLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

var edgeInts = []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
	65535, 65536, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64,
	1_700_000_000_000}

var edgeUints = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64,
	7 << 16, 123456789 << 16}

func randTask(rng *rand.Rand) *Task {
	str := func() string {
		if rng.IntN(3) == 0 {
			return strings.Repeat("x", edgeLens[rng.IntN(len(edgeLens))])
		}
		return strings.Repeat("é", rng.IntN(20))
	}
	bin := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		return bytes.Repeat([]byte{'7'}, edgeLens[rng.IntN(len(edgeLens))])
	}
	i := func() int64 { return edgeInts[rng.IntN(len(edgeInts))] }
	u := func() uint64 { return edgeUints[rng.IntN(len(edgeUints))] }
	return &Task{Tenant: str(), ID: str(), Queue: str(), Status: str(), Owner: str(), LeaseUntil: i(),
		FencingToken: u(), Version: u(), Attempt: u(), Priority: i(), ArtifactID: str(), Payload: bin(),
		Result: bin(), CreatedAt: i(), UpdatedAt: i(), Seq: u()}
}

func TestTaskCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tasks := []*Task{{}}
	for range 1000 {
		tasks = append(tasks, randTask(rng))
	}
	for _, tk := range tasks {
		want := reflectEncode(t, tk)
		got := encode(tk)
		if !bytes.Equal(got, want) {
			t.Fatalf("encode(%+v):\n got %x\nwant %x", tk, got, want)
		}
		var back Task
		if err := decodeTask(got, &back); err != nil {
			t.Fatalf("decodeTask: %v", err)
		}
		ref, err := reflectDecodeTask(got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, ref) {
			t.Fatalf("decodeTask gave\n %+v\nthe reflection codec\n %+v", back, *ref)
		}
	}
}

// A record the hand-written reader does not expect (another shape, a
// field it does not know) still decodes, through the reflection codec.
func TestTaskDecodeFallsBack(t *testing.T) {
	type taskWithExtra struct {
		ID    string
		Queue string
		Extra int
	}
	b := reflectEncode(t, &taskWithExtra{ID: "a", Queue: "q", Extra: 3})
	var fast Task
	if decodeTask(b, &fast) == nil {
		t.Fatal("decodeTask accepted a field Task does not have")
	}
	var tk Task
	if err := decode(b, &tk); err != nil || tk.ID != "a" || tk.Queue != "q" {
		t.Fatalf("decode: %+v, %v; want the reflection codec's ID a, Queue q", tk, err)
	}
}

// FuzzTaskCodec: whatever the bytes, the hand-written reader either
// refuses them or agrees with the reflection codec, and what it reads
// encodes back to the reflection codec's bytes.
func FuzzTaskCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		f.Add(encode(randTask(rng)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast Task
		if decodeTask(b, &fast) != nil {
			return
		}
		ref, err := reflectDecodeTask(b)
		if err != nil {
			t.Fatalf("decodeTask accepted %x, which the reflection codec refuses: %v", b, err)
		}
		if !reflect.DeepEqual(&fast, ref) {
			t.Fatalf("%x: decodeTask gave\n %+v\nthe reflection codec\n %+v", b, fast, *ref)
		}
		if got, want := encode(&fast), reflectEncode(t, &fast); !bytes.Equal(got, want) {
			t.Fatalf("encode(%+v):\n got %x\nwant %x", fast, got, want)
		}
	})
}

func randCommand(rng *rand.Rand) *Command {
	t := randTask(rng) // its strings, slices and integers, reused
	return &Command{Kind: Kind(t.Status), Now: t.CreatedAt, Tenant: t.Tenant, Principal: t.Owner,
		IdemKey: t.ID, IdemFP: t.Result, IdemTTL: t.LeaseUntil, Args: t.Payload}
}

func reflectDecodeCommands(b []byte) ([]*Command, error) {
	var cmds []*Command
	err := codec.NewDecoderBytes(b, mh).Decode(&cmds)
	return cmds, err
}

func TestCommandCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 2, 15, 16, 17, 255, MaxCommandsPerEntry} {
		for range max(2, 40/n) {
			cmds := make([]*Command, n)
			for i := range cmds {
				cmds[i] = randCommand(rng)
			}
			want := append([]byte{EntryVersion}, reflectEncode(t, cmds)...)
			got := EncodeEntry(cmds)
			if !bytes.Equal(got, want) {
				t.Fatalf("EncodeEntry of %d commands:\n got %x\nwant %x", n, got, want)
			}
			back, err := decodeCommands(got[1:], MaxCommandsPerEntry)
			if err != nil {
				t.Fatalf("decodeCommands of %d: %v", n, err)
			}
			ref, err := reflectDecodeCommands(got[1:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ref) {
				t.Fatalf("decodeCommands of %d differs from the reflection codec", n)
			}
		}
	}
	// What the fast reader leaves to the reflection codec: DecodeEntry
	// still refuses it, as before.
	tooMany := make([]*Command, MaxCommandsPerEntry+1)
	for i := range tooMany {
		tooMany[i] = &Command{Kind: "k"}
	}
	for _, cmds := range [][]*Command{{}, {nil}, {{Kind: "a"}, nil}, tooMany} {
		b := EncodeEntry(cmds)
		if !bytes.Equal(b[1:], reflectEncode(t, cmds)) {
			t.Fatalf("EncodeEntry(%d commands) differs from the reflection codec", len(cmds))
		}
		if _, err := DecodeEntry(b); err == nil {
			t.Errorf("DecodeEntry accepted %d commands (%v)", len(cmds), cmds)
		}
	}
}

// FuzzCommandCodec: what the fast entry reader accepts, the reflection
// codec reads alike, and both encode it alike.
func FuzzCommandCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 2))
	for n := range 5 {
		cmds := []*Command{randCommand(rng)}
		for range n * 4 {
			cmds = append(cmds, randCommand(rng))
		}
		f.Add(EncodeEntry(cmds)[1:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := decodeCommands(b, MaxCommandsPerEntry)
		if err != nil {
			return
		}
		ref, err := reflectDecodeCommands(b)
		if err != nil {
			t.Fatalf("decodeCommands accepted %x, which the reflection codec refuses: %v", b, err)
		}
		if !reflect.DeepEqual(cmds, ref) {
			t.Fatalf("%x: decodeCommands differs from the reflection codec", b)
		}
		if got, want := EncodeEntry(cmds)[1:], reflectEncode(t, cmds); !bytes.Equal(got, want) {
			t.Fatalf("EncodeEntry:\n got %x\nwant %x", got, want)
		}
	})
}
