package usageevent

import (
	"strings"
	"testing"
)

// TestAppendProviderUsage checks what AppendProviderUsage's documentation
// promises: the wire form of a plain object after dst, and dst untouched
// for what it leaves to encoding/json.
func TestAppendProviderUsage(t *testing.T) {
	nested := func(n int) string { // n objects, one inside the other
		return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
	}
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{"{ \"prompt_tokens\" : 4,\n \"note\": \"<b> & \u2028\" }", `{"prompt_tokens":4,"note":"\u003cb\u003e \u0026 \u2028"}`, true},
		{nested(17), nested(17), true}, // 16 levels below the top
		{nested(18), "", false},
		{`{"a":"\u00e9"}`, "", false}, // valid, but a \u escape
		{`[1,2]`, "", false},          // not an object
		{`{"a":1,}`, "", false},       // not JSON
	} {
		got, ok := AppendProviderUsage([]byte("x"), []byte(c.raw))
		if ok != c.ok || string(got) != "x"+c.want {
			t.Errorf("AppendProviderUsage(%q) = %q, %v; want %q, %v", c.raw, got, ok, "x"+c.want, c.ok)
		}
	}
}
