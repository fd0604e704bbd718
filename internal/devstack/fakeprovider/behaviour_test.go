package fakeprovider

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		want     Behaviour
		wantText string
		wantErr  bool
	}{
		{name: "none", text: "  hello   world ", wantText: "hello world"},
		{
			name:     "status and retry",
			text:     "hi [[status=429]] [[retry_after=7]] there",
			want:     Behaviour{Status: 429, RetryAfter: 7 * time.Second},
			wantText: "hi there",
		},
		{name: "quota", text: "[[quota]]", want: Behaviour{Quota: true}},
		{name: "hang", text: "x [[hang]]", want: Behaviour{Hang: true}, wantText: "x"},
		{name: "reset", text: "[[reset=after_body]]", want: Behaviour{Reset: true}},
		{
			name:     "stream knobs",
			text:     "a [[chunks=5]][[event_delay_ms=20]] [[delay_ms=30]] [[first_event_delay_ms=40]] b",
			want:     Behaviour{Chunks: 5, EventDelay: 20 * time.Millisecond, Delay: 30 * time.Millisecond, FirstEventDelay: 40 * time.Millisecond},
			wantText: "a b",
		},
		{name: "cut", text: "[[cut=after_events:0]]", want: Behaviour{Cut: true, CutAfter: 0}},
		{name: "error event", text: "[[error_event=after:3]]", want: Behaviour{ErrorEvent: true, ErrorAfter: 3}},
		{
			name: "usage extras",
			text: "[[cache_read=4]] [[cache_write=2]] [[reasoning=1]]",
			want: Behaviour{CacheReadTokens: 4, CacheWriteTokens: 2, ReasoningTokens: 1},
		},
		{
			name: "rate limits",
			text: "[[ratelimit_remaining_requests=0]] [[ratelimit_remaining_tokens=12]] [[ratelimit_reset=30s]]",
			want: Behaviour{RateLimit: RateLimit{Requests: ptr(0), Tokens: ptr(12), Reset: 30 * time.Second}},
		},
		{name: "rate limit reset not a duration", text: "[[ratelimit_reset=30]]", wantErr: true},
		{name: "rate limit reset zero", text: "[[ratelimit_reset=0s]]", wantErr: true},
		{name: "rate limit negative", text: "[[ratelimit_remaining_requests=-1]]", wantErr: true},
		{name: "not a directive", text: "[[ status=1 ]] [x]", wantText: "[[ status=1 ]] [x]"},
		{name: "unknown", text: "[[stauts=429]]", wantErr: true},
		{name: "status out of range", text: "[[status=200]]", wantErr: true},
		{name: "status not a number", text: "[[status=abc]]", wantErr: true},
		{name: "negative delay", text: "[[delay_ms=-1]]", wantErr: true},
		{name: "zero chunks", text: "[[chunks=0]]", wantErr: true},
		{name: "reset value", text: "[[reset=now]]", wantErr: true},
		{name: "cut without prefix", text: "[[cut=2]]", wantErr: true},
		{name: "error event without prefix", text: "[[error_event=2]]", wantErr: true},
		{name: "hang with value", text: "[[hang=1]]", wantErr: true},
		{name: "missing value", text: "[[retry_after]]", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, text, err := ParseDirectives(tt.text)
			if tt.wantErr {
				if !errors.Is(err, ErrDirective) {
					t.Fatalf("ParseDirectives(%q) error = %v, want ErrDirective", tt.text, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDirectives(%q): %v", tt.text, err)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("behaviour (-got +want):\n%s", diff)
			}
			if text != tt.wantText {
				t.Errorf("text = %q, want %q", text, tt.wantText)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"abcdef", 3, []string{"ab", "cd", "ef"}},
		{"abcdefg", 3, []string{"ab", "cd", "efg"}},
		{"ab", 5, []string{"a", "b"}},
		{"héllo", 0, []string{"h", "él", "lo"}},
		{"", 2, []string{""}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(split(tt.text, tt.n), tt.want); diff != "" {
			t.Errorf("split(%q, %d) (-got +want):\n%s", tt.text, tt.n, diff)
		}
	}
}

func ptr(n int) *int { return &n }
