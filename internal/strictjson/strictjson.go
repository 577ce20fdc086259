// Package strictjson refuses JSON text that encoding/json would accept by
// changing it: bytes that are not UTF-8 and lone UTF-16 surrogate escapes
// (both decoded as U+FFFD), and an object field given twice (the last one
// silently wins, or, for a struct, any spelling of the name in any case).
//
// A job's request must be stored as the bytes its author wrote (P2), so
// the JSON inputs that carry requests (enqueue --from lines and the admin
// API's bodies) are checked with Check before they are decoded.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check reports the first reason text would be decoded as something else
// than it says, or nil. Text that is not JSON at all is left to the
// decoder, which names its syntax error.
func Check(text []byte) error {
	if !utf8.Valid(text) {
		i := 0
		for i < len(text) {
			r, n := utf8.DecodeRune(text[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("byte %d (0x%02x) is not UTF-8; JSON text must be UTF-8 (a binary body goes base64 where the format allows it)", i, text[i])
	}
	if err := surrogates(text); err != nil {
		return err
	}
	return duplicates(text)
}

// surrogates finds a \uXXXX escape of a UTF-16 surrogate that is not half
// of a pair, which encoding/json turns into U+FFFD.
func surrogates(text []byte) error {
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' {
			continue
		}
		if i+1 >= len(text) || text[i+1] != 'u' {
			i++ // another escape: skip the escaped byte, a backslash included
			continue
		}
		hi, ok := hex4(text, i+2)
		if !ok {
			i++
			continue
		}
		switch {
		case hi >= 0xD800 && hi <= 0xDBFF:
			if lo, ok := hex4(text, i+8); ok && i+7 < len(text) && text[i+6] == '\\' && text[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return fmt.Errorf("the escape %s at byte %d is half of a UTF-16 surrogate pair without its other half (it would be decoded as U+FFFD)", text[i:i+6], i)
		case hi >= 0xDC00 && hi <= 0xDFFF:
			return fmt.Errorf("the escape %s at byte %d is the second half of a UTF-16 surrogate pair without its first (it would be decoded as U+FFFD)", text[i:i+6], i)
		}
		i += 5
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// foldName is name in the form encoding/json compares struct field names
// in: each rune replaced by the smallest rune of its Unicode simple case
// folding orbit, so "URL", "url" and "ſtatus_url" (long s) meet their
// twins, as they would in a struct.
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// frame is one open object or array while duplicates walks the tokens.
type frame struct {
	object  bool
	wantKey bool              // an object's next token is a field name
	keys    map[string]string // folded name → name as written
}

// valueDone notes that a value inside the frame ended: in an object, a
// field name comes next.
func (f *frame) valueDone() {
	if f.object {
		f.wantKey = true
	}
}

// duplicates finds an object with a field name given twice, exactly or in
// another case (encoding/json matches struct fields without regard to
// case, so both spellings fill the same field).
func duplicates(text []byte) error {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error: the decoder that follows names it
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					stack[len(stack)-1].valueDone()
				}
				continue
			}
			name, _ := tok.(string)
			low := foldName(name)
			if prev, dup := top.keys[low]; dup {
				if prev == name {
					return fmt.Errorf("the field %q is given twice in one object; give each field once", name)
				}
				return fmt.Errorf("the fields %q and %q name the same field (names match without regard to case); give each field once", prev, name)
			}
			top.keys[low] = name
			top.wantKey = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]string{}})
		case '[':
			stack = append(stack, &frame{})
		case ']', '}':
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].valueDone()
			}
		default:
			if top != nil {
				top.valueDone()
			}
		}
	}
}

// Decode decodes exactly one JSON value of v's shape from text, refusing
// what Check refuses, fields v does not have, and anything after the
// value. Its error reads as what is accepted, for a refusal that names
// the input ("JSON as written: …").
func Decode(text []byte, v any) error {
	if err := Check(text); err != nil {
		return fmt.Errorf("JSON as written: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("a JSON object of the documented shape (%w)", err)
	}
	// dec.More alone lets a stray "}" or "]" through.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("exactly one JSON object, nothing after it")
	}
	return nil
}
