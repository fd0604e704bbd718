package routesnap_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
)

func TestMatch(t *testing.T) {
	type result struct {
		Star string
		OK   bool
	}
	tests := []struct {
		pattern, name string
		want          result
	}{
		{"claude-*", "claude-sonnet-4-5", result{"sonnet-4-5", true}},
		{"claude-*", "claude-", result{}},      // the star stands for at least one character
		{"claude-*", "Claude-opus", result{}},  // case-sensitive, like every model name
		{"claude-*", "xclaude-opus", result{}}, // a prefix, not a substring
		{"openai/*", "openai/gpt-4o", result{"gpt-4o", true}},
		{"*", "anything", result{"anything", true}},
		{"*", "", result{}},
		{"gpt-4o", "gpt-4o", result{"", true}}, // an exact name matches itself
		{"gpt-4o", "gpt-4o-mini", result{}},
		{"claude-*", "claude-*", result{"*", true}}, // a star asked is just a character
	}
	for _, tt := range tests {
		star, ok := routesnap.Match(tt.pattern, tt.name)
		if diff := cmp.Diff(result{star, ok}, tt.want); diff != "" {
			t.Errorf("Match(%q, %q) (-got +want):\n%s", tt.pattern, tt.name, diff)
		}
	}
}

func TestExpand(t *testing.T) {
	tests := []struct{ model, star, want string }{
		{"*", "gpt-4o", "gpt-4o"},
		{"claude-*", "sonnet-4-5", "claude-sonnet-4-5"},
		{"claude-haiku-4-5", "haiku-4-5-20251001", "claude-haiku-4-5"},
		{"us.anthropic.claude-*-v1:0", "sonnet-4-5", "us.anthropic.claude-sonnet-4-5-v1:0"},
	}
	for _, tt := range tests {
		if got := routesnap.Expand(tt.model, tt.star); got != tt.want {
			t.Errorf("Expand(%q, %q) = %q, want %q", tt.model, tt.star, got, tt.want)
		}
	}
}
