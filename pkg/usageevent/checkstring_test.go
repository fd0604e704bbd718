package usageevent

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzCheckString holds checkString's ASCII pass to the full check,
// checkAnyString: the same verdict, in the same order of precedence, for
// every string.
func FuzzCheckString(f *testing.F) {
	for _, s := range []string{
		"", "k_123", "gpt-4.1-mini", "sg-1\nforged", "t\x7f", "k\xff", "\x00",
		"é", "日本語モデル", "\u2028", "a\xe2\x80", // truncated rune
		strings.Repeat("m", MaxStringLength), strings.Repeat("m", MaxStringLength+1),
		strings.Repeat("é", MaxStringLength), strings.Repeat("é", MaxStringLength+1),
		strings.Repeat("m", MaxStringLength+1) + "\x01", // long and a control: long wins
		strings.Repeat("m", MaxStringLength+1) + "\xff", // long and invalid: invalid wins
		"\x01\xff", // a control and invalid: invalid wins
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := checkString(s), checkAnyString(s); got != want {
			t.Errorf("checkString(%q) = %q; want %q", s, got, want)
		}
	})
}

// BenchmarkCheckString is one typical id.
func BenchmarkCheckString(b *testing.B) {
	for _, s := range []string{"sg-8a17d3c05b9e2f64a1c7d0e3", "gpt-4.1-mini-2025-04-14"} {
		b.Run(fmt.Sprint(len(s)), func(b *testing.B) {
			for b.Loop() {
				if checkString(s) != "" {
					b.Fatal("invalid")
				}
			}
		})
	}
}
