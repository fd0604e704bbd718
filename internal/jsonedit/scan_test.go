package jsonedit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"testing"
)

// TestSpecial8: the eight-byte test finds the first byte the byte table
// says is not plain (or none) for every byte at every position among
// plain bytes, and for pairs of bytes near the edges (where a borrow from
// one byte could hide or fake another).
func TestSpecial8(t *testing.T) {
	check := func(w []byte) {
		want := -1
		for i, c := range w {
			if !plain[c] {
				want = i
				break
			}
		}
		got := -1
		if m := special8(binary.LittleEndian.Uint64(w)); m != 0 {
			got = bits.TrailingZeros64(m) / 8
		}
		if got != want {
			t.Fatalf("special8(% x): first special byte %d, want %d", w, got, want)
		}
	}
	for _, bg := range []byte{'a', ' ', '!', '#', '[', ']', 0x7f, 0x80, 0xff} {
		w := bytes.Repeat([]byte{bg}, 8)
		check(w)
		for p := range 8 {
			for v := range 256 {
				w[p] = byte(v)
				check(w)
			}
			w[p] = bg
		}
	}
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	w := bytes.Repeat([]byte{'a'}, 8)
	for p := range 7 {
		for _, v1 := range edges {
			for _, v2 := range edges {
				w[p], w[p+1] = v1, v2
				check(w)
			}
		}
		w[p], w[p+1] = 'a', 'a'
	}
}

// TestScanStringAcrossWords: a quote, an escape, a control character or
// a non-ASCII byte at any offset of strings of every length around the
// eight-byte steps is found where encoding/json finds it.
func TestScanStringAcrossWords(t *testing.T) {
	for n := range 26 {
		for at := range n {
			for _, c := range []string{`"`, `\n`, `\u00e9`, "\x01", "\x1f", "\xc3\xa9", "\xff", `\`, `\x`} {
				body := bytes.Repeat([]byte{'a'}, n)
				doc := []byte(`{"k":"` + string(body[:at]) + c + string(body[at:]) + `"}`)
				_, _, err := Lookup(doc, "k")
				if got, want := err == nil, json.Valid(doc); got != want {
					t.Fatalf("%q: valid %t, encoding/json %t (%v)", doc, got, want, err)
				}
			}
		}
	}
}
