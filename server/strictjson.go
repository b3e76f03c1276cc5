package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Strict JSON (api-notes.md "General"): encoding/json on its own matches
// member names case-insensitively, keeps the last of duplicate members,
// and turns invalid UTF-8 and lone surrogate escapes into U+FFFD. A
// request body is refused instead when it has any of them, at any depth:
// each is a body that two JSON readers may understand differently.

// checkJSONText checks b, one JSON text, for invalid UTF-8 and for \u
// escapes of lone surrogates. It does not check the grammar.
func checkJSONText(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("invalid UTF-8")
	}
	if !bytes.Contains(b, []byte(`\u`)) {
		return nil
	}
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(b) {
				return nil // the grammar check words it
			}
			if b[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				return nil
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Errorf("lone surrogate escape \\u%04x", r)
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := rune(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					lo, ok = hex4(b, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Errorf("lone surrogate escape \\u%04x", r)
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return nil
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// checkMembers walks b, one JSON value, and refuses duplicate members in
// any object, and members of a struct of t (v's type) whose names are not
// exactly one of its fields' JSON names. Values of other types (maps,
// json.RawMessage, interfaces) may have any member names, once each.
func checkMembers(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return walkValue(dec, t, nil)
}

// jsonPath is where a value is in the body, for error messages: its
// member name or array index within its parent. It is spelled out only
// for an error, not for every value walked.
type jsonPath struct {
	parent  *jsonPath
	member  string
	index   int
	element bool // an array element (index), not a member
}

func (p *jsonPath) String() string {
	if p == nil {
		return ""
	}
	at := p.parent.String()
	if p.element {
		return fmt.Sprintf("%s[%d]", at, p.index)
	}
	if at == "" {
		return p.member
	}
	return at + "." + p.member
}

// maxLinearMembers: an object with up to this many members is checked for
// duplicates by comparing names, a larger one through a map.
const maxLinearMembers = 16

func walkValue(dec *json.Decoder, t reflect.Type, path *jsonPath) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	t = freeType(t)
	switch d {
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = structFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		var names []string
		var seen map[string]bool
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			dup := false
			if seen != nil {
				dup = seen[k]
				seen[k] = true
			} else {
				dup = slices.Contains(names, k)
				if names = append(names, k); len(names) > maxLinearMembers {
					seen = make(map[string]bool, 2*len(names))
					for _, n := range names {
						seen[n] = true
					}
				}
			}
			if dup {
				return fmt.Errorf("duplicate member %q%s", k, where(path))
			}
			vt := elem
			if fields != nil {
				ft, ok := fields[k]
				if !ok {
					return fmt.Errorf("unknown member %q%s (names are case-sensitive)", k, where(path))
				}
				vt = ft
			}
			if err := walkValue(dec, vt, &jsonPath{parent: path, member: k}); err != nil {
				return err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, elem, &jsonPath{parent: path, index: i, element: true}); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

func where(path *jsonPath) string {
	at := path.String()
	if at == "" {
		return ""
	}
	return " in " + at
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// freeType is t without pointers, or nil when t's members are not fields
// (json.RawMessage, a custom unmarshaler, an interface).
func freeType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields maps the JSON names of t's fields (as encoding/json names
// them, embedded structs' fields inlined) to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(m, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
}
