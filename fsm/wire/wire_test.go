package wire

import "testing"

func TestEventIDs(t *testing.T) {
	for _, c := range []struct {
		id   string
		want EventPos
		ok   bool
	}{
		{"7", EventPos{7, -1}, true},
		{"7.0", EventPos{7, 0}, true},
		{"18446744073709551615.3", EventPos{1<<64 - 1, 3}, true},
		{"", EventPos{}, false},
		{"x", EventPos{}, false},
		{"7.", EventPos{}, false},
		{"7.-1", EventPos{}, false},
		{"-7", EventPos{}, false},
		{"7.1.2", EventPos{}, false},
	} {
		got, ok := ParseEventID(c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseEventID(%q) = %+v, %v; want %+v, %v", c.id, got, ok, c.want, c.ok)
		}
		if ok && got.String() != c.id {
			t.Errorf("ParseEventID(%q).String() = %q", c.id, got.String())
		}
	}
	order := []EventPos{{3, 0}, {3, 5}, {3, -1}, {4, 0}, {4, -1}}
	for i, p := range order {
		for j, q := range order {
			if got, want := p.After(q), i > j; got != want {
				t.Errorf("%v.After(%v) = %v, want %v", p, q, got, want)
			}
		}
	}
}
