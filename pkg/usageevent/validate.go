package usageevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/internal/contract"
	"github.com/scootgate/scootgate/pkg/internal/plainjson"
	"github.com/scootgate/scootgate/pkg/usd"
)

// MaxStringLength is the longest id or name in an event, in characters.
const MaxStringLength = 256

// MaxStageLength is the longest failure stage, in bytes.
const MaxStageLength = 64

// MaxAttempt is the highest attempt number, the schema's maximum: the
// largest a Go int holds on every platform, so that an event valid on one
// is valid on all.
const MaxAttempt = math.MaxInt32

// Problem is one reason a document is invalid: a member path and what is
// wrong there.
type Problem = contract.Problem

// ValidationError lists every problem [Event.Validate] found.
type ValidationError struct {
	Problems []Problem // in member order; never empty
}

func (e *ValidationError) Error() string {
	return contract.ProblemsText("usageevent: invalid event: ", e.Problems)
}

// Validate checks the event's meaning and returns a [*ValidationError]
// listing every problem, or nil. It checks that:
//
//   - event_id is a UUID in canonical lowercase form;
//   - schema is [Schema] and authoritative is false;
//   - node_id, request_id, tenant_id, key_id, public_model,
//     provider_model and backend are 1–[MaxStringLength] characters without
//     control characters, and so is model_pattern when present;
//   - protocol and send_state are known values, attempt is 1–[MaxAttempt];
//   - failure_stage is "" or 1–[MaxStageLength] of [a-z0-9_] starting with
//     a letter, and "" only with send_state response_received;
//   - http_status is 0 or 100–599;
//   - byte counts are not negative; ttfb_ms and duration_ms are finite
//     and not negative; started_at is set;
//   - without a response (send_state other than response_received) there
//     are no response bytes, no TTFB and no usage;
//   - cost, when present, has a usd in [usd.Amount.String]'s form (at
//     most 12 digits after the point, no trailing zero, not above
//     [usd.Max]) and is not estimated when usage is set;
//   - usage and provider_usage are both null or both set; provider_usage
//     is a JSON object; token counts are not negative, cache reads plus
//     cache writes do not exceed input, reasoning does not exceed output.
func (e *Event) Validate() error {
	if e == nil {
		return &ValidationError{Problems: []Problem{{Msg: "event is nil"}}}
	}
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}

	if !isCanonicalUUID(e.EventID) {
		add("event_id", "must be a UUID in canonical lowercase form (8-4-4-4-12 hex digits)")
	}
	if e.Schema != Schema {
		add("schema", "must be %d, got %d", Schema, e.Schema)
	}
	if e.Authoritative {
		add("authoritative", "must be false: usage events are not a billing ledger")
	}
	for _, f := range [...]struct{ path, v string }{
		{"node_id", e.NodeID},
		{"request_id", e.RequestID},
		{"tenant_id", e.TenantID},
		{"key_id", e.KeyID},
		{"public_model", e.PublicModel},
		{"provider_model", e.ProviderModel},
		{"backend", e.Backend},
	} {
		if msg := checkString(f.v); msg != "" {
			add(f.path, "%s", msg)
		}
	}
	if !slices.Contains(Protocols(), e.Protocol) {
		add("protocol", "must be %s", contract.OneOf(Protocols()))
	}
	if e.ModelPattern != "" {
		if msg := checkString(e.ModelPattern); msg != "" {
			add("model_pattern", "%s", msg)
		}
	}
	if e.ServedModel != "" {
		if msg := checkString(e.ServedModel); msg != "" {
			add("served_model", "%s", msg)
		}
	}
	if e.Platform != "" && !isStage(e.Platform) {
		add("platform", "must be absent or 1-%d of [a-z0-9_] starting with a letter", MaxStageLength)
	}
	if e.Region != "" && !validRegion(e.Region) {
		add("region", "must be absent or 1-64 of [a-z0-9-] starting with a letter")
	}
	if e.Endpoint != "" && !isStage(e.Endpoint) {
		add("endpoint", "must be absent or 1-%d of [a-z0-9_] starting with a letter", MaxStageLength)
	}
	switch {
	case e.Attempt < 1:
		add("attempt", "must be at least 1")
	case e.Attempt > MaxAttempt:
		add("attempt", "must be at most %d", MaxAttempt)
	}
	switch e.SendState {
	case SendDefinitelyNotSent, SendPossiblySent, SendResponseReceived:
	default:
		add("send_state", "must be %q, %q or %q", SendDefinitelyNotSent, SendPossiblySent, SendResponseReceived)
	}
	switch {
	case e.FailureStage == "" && e.SendState != SendResponseReceived:
		add("failure_stage", "required when send_state is not %q", SendResponseReceived)
	case e.FailureStage != "" && !isStage(e.FailureStage):
		add("failure_stage", "must be 1-%d of [a-z0-9_] starting with a letter", MaxStageLength)
	}
	if e.HTTPStatus != 0 && (e.HTTPStatus < 100 || e.HTTPStatus > 599) {
		add("http_status", "must be 0 or 100-599, got %d", e.HTTPStatus)
	}
	if e.RequestBytes < 0 {
		add("request_bytes", "must not be negative")
	}
	if e.ResponseBytes < 0 {
		add("response_bytes", "must not be negative")
	}
	if msg := checkMillis(e.TTFBMs); msg != "" {
		add("ttfb_ms", "%s", msg)
	}
	if msg := checkMillis(e.DurationMs); msg != "" {
		add("duration_ms", "%s", msg)
	}
	if e.StartedAt.IsZero() {
		add("started_at", "required")
	}

	hasRaw := e.HasProviderUsage()
	if e.SendState == SendDefinitelyNotSent || e.SendState == SendPossiblySent {
		// No response arrived: nothing can have been read from it.
		if e.ResponseBytes != 0 {
			add("response_bytes", "must be 0 when send_state is %q", e.SendState)
		}
		if e.TTFBMs != 0 {
			add("ttfb_ms", "must be 0 when send_state is %q", e.SendState)
		}
		if e.Usage != nil {
			add("usage", "must be null when send_state is %q", e.SendState)
		}
	}
	switch {
	case e.Usage == nil && hasRaw:
		add("usage", "must be set when provider_usage is set")
	case e.Usage != nil && !hasRaw:
		add("provider_usage", "must be set when usage is set")
	}
	if hasRaw {
		if v := trimJSONSpace(e.ProviderUsage); !plainjson.Valid(v) && !json.Valid(v) || v[0] != '{' {
			add("provider_usage", "must be a JSON object or null")
		}
	}
	if e.Usage != nil {
		for _, p := range e.Usage.problems() {
			add("usage"+p.Path, "%s", p.Msg)
		}
	}
	if c := e.Cost; c != nil {
		switch _, err := usd.ParseAmount(c.USD); {
		case errors.Is(err, usd.ErrRange):
			add("cost.usd", "must be at most 9223372 (US dollars), got %q", clipQuote(c.USD))
		case err != nil || !canonicalUSD(c.USD):
			add("cost.usd", "must be an exact decimal string of US dollars with at most 12 digits after the point and no trailing zero after it, got %q", clipQuote(c.USD))
		}
		if c.Estimated && e.Usage != nil {
			add("cost.estimated", "must be false when usage is set (the cost is the reported usage's)")
		}
	}

	if len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

// problems returns what is wrong with u, with paths relative to it
// (".input_tokens").
func (u *Usage) problems() []Problem {
	var ps []Problem
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{".input_tokens", u.InputTokens},
		{".output_tokens", u.OutputTokens},
		{".cache_read_tokens", u.CacheReadTokens},
		{".cache_write_tokens", u.CacheWriteTokens},
		{".reasoning_tokens", u.ReasoningTokens},
	} {
		if f.v < 0 {
			ps = append(ps, Problem{Path: f.path, Msg: "must not be negative"})
		}
	}
	if len(ps) > 0 {
		return ps // the sums below mean nothing with negative parts
	}
	// Subtraction, not addition: the sum of two valid counts may overflow.
	if u.CacheReadTokens > u.InputTokens || u.CacheWriteTokens > u.InputTokens-u.CacheReadTokens {
		ps = append(ps, Problem{Msg: "cache_read_tokens + cache_write_tokens must not exceed input_tokens (cache tokens are part of the input)"})
	}
	if u.ReasoningTokens > u.OutputTokens {
		ps = append(ps, Problem{Path: ".reasoning_tokens", Msg: "must not exceed output_tokens (reasoning is part of the output)"})
	}
	return ps
}

// checkString returns what is wrong with an id or name, or "". Ids and
// names are nearly always printable ASCII, which one pass decides: a node
// validates every event it records, and the three passes below (validity,
// length, controls) cost it ~2k instructions an event.
func checkString(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f { // a control, DEL or not ASCII
			return checkAnyString(s)
		}
	}
	switch {
	case s == "":
		return "required"
	case len(s) > MaxStringLength:
		return fmt.Sprintf("longer than %d characters", MaxStringLength)
	}
	return ""
}

// checkAnyString is checkString for any string.
func checkAnyString(s string) string {
	switch {
	case s == "":
		return "required"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > MaxStringLength:
		return fmt.Sprintf("longer than %d characters", MaxStringLength)
	case strings.ContainsFunc(s, isControl):
		return "must not contain control characters"
	}
	return ""
}

// isControl reports C0 controls and DEL: the characters that can forge
// lines in logs. The JSON Schema's pattern rejects the same set.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func checkMillis(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "must be finite"
	case v < 0:
		return "must not be negative"
	}
	return ""
}

// isStage reports whether s is 1–MaxStageLength of [a-z0-9_] starting
// with a letter (the schema's pattern).
func isStage(s string) bool {
	if len(s) == 0 || len(s) > MaxStageLength || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// isCanonicalUUID reports whether s is 8-4-4-4-12 lowercase hex digits.
func isCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// validRegion: 1-64 of [a-z0-9-] starting with a letter.
func validRegion(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// canonicalUSD reports whether s is written as [usd.Amount.String] writes
// it: no trailing zero after the point (so that one cost has one
// spelling, as the schema's pattern says).
func canonicalUSD(s string) bool {
	return !strings.Contains(s, ".") || !strings.HasSuffix(s, "0")
}

// clipQuote shortens a value quoted in a message.
func clipQuote(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
