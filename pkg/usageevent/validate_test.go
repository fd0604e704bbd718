package usageevent_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// validEvent is a successful OpenAI non-stream attempt.
func validEvent() *usageevent.Event {
	return &usageevent.Event{
		EventID:       "01936f4e-8a2b-7c3d-9e4f-0a1b2c3d4e5f",
		Schema:        usageevent.Schema,
		NodeID:        "node-a",
		RequestID:     "sg-0123456789abcdef01234567",
		TenantID:      "t_9",
		KeyID:         "k_123",
		PublicModel:   "demo-gpt",
		ProviderModel: "gpt-4o",
		Backend:       "openai-1",
		Protocol:      usageevent.ProtocolOpenAI,
		Attempt:       1,
		SendState:     usageevent.SendResponseReceived,
		HTTPStatus:    200,
		RequestBytes:  300,
		ResponseBytes: 700,
		TTFBMs:        12.5,
		DurationMs:    13,
		StartedAt:     time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Usage:         &usageevent.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 4, ReasoningTokens: 2},
		ProviderUsage: json.RawMessage(`{"prompt_tokens":10,"completion_tokens":5}`),
	}
}

// notSent turns e into an attempt that never reached the provider.
func notSent(e *usageevent.Event) {
	e.SendState, e.FailureStage, e.HTTPStatus = usageevent.SendDefinitelyNotSent, usageevent.StageConnect, 0
	e.ResponseBytes, e.TTFBMs, e.Usage, e.ProviderUsage = 0, 0, nil, nil
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(e *usageevent.Event)
		want   []usageevent.Problem // nil = valid
	}{
		{name: "valid", mutate: func(*usageevent.Event) {}},
		{name: "definitely not sent, no answer", mutate: notSent},
		{
			name: "possibly sent, 502",
			mutate: func(e *usageevent.Event) {
				notSent(e)
				e.SendState, e.FailureStage, e.HTTPStatus = usageevent.SendPossiblySent, usageevent.StageSend, 502
			},
		},
		{
			name:   "provider_usage JSON null means none",
			mutate: func(e *usageevent.Event) { notSent(e); e.ProviderUsage = json.RawMessage(" null ") },
		},
		{
			name: "a stage this package does not know",
			mutate: func(e *usageevent.Event) {
				e.FailureStage = "a_stage_from_2030" + strings.Repeat("x", usageevent.MaxStageLength-17)
			},
		},
		{
			name:   "names of exactly 256 characters",
			mutate: func(e *usageevent.Event) { e.ProviderModel = strings.Repeat("é", usageevent.MaxStringLength) },
		},
		{
			name: "usage parts equal to their wholes",
			mutate: func(e *usageevent.Event) {
				e.Usage = &usageevent.Usage{InputTokens: 10, CacheReadTokens: 6, CacheWriteTokens: 4, OutputTokens: 3, ReasoningTokens: 3}
			},
		},
		{
			name: "usage counts at the int64 limit",
			mutate: func(e *usageevent.Event) {
				e.Usage = &usageevent.Usage{InputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64 - 1, CacheWriteTokens: 1}
			},
		},
		{
			name: "identity and contract",
			mutate: func(e *usageevent.Event) {
				e.EventID = strings.ToUpper(e.EventID)
				e.Schema = 1
				e.Authoritative = true
			},
			want: []usageevent.Problem{
				{Path: "event_id", Msg: "must be a UUID in canonical lowercase form (8-4-4-4-12 hex digits)"},
				{Path: "schema", Msg: "must be 2, got 1"},
				{Path: "authoritative", Msg: "must be false: usage events are not a billing ledger"},
			},
		},
		{
			name:   "event id without hyphens",
			mutate: func(e *usageevent.Event) { e.EventID = strings.ReplaceAll(e.EventID, "-", "") + "abcd" },
			want:   []usageevent.Problem{{Path: "event_id", Msg: "must be a UUID in canonical lowercase form (8-4-4-4-12 hex digits)"}},
		},
		{
			name: "names",
			mutate: func(e *usageevent.Event) {
				e.NodeID = ""
				e.RequestID = "sg-1\nforged log line"
				e.TenantID = "t\x7f"
				e.KeyID = "k\xff"
				e.PublicModel = strings.Repeat("m", usageevent.MaxStringLength+1)
				e.ProviderModel = ""
				e.Backend = ""
			},
			want: []usageevent.Problem{
				{Path: "node_id", Msg: "required"},
				{Path: "request_id", Msg: "must not contain control characters"},
				{Path: "tenant_id", Msg: "must not contain control characters"},
				{Path: "key_id", Msg: "must be valid UTF-8"},
				{Path: "public_model", Msg: "longer than 256 characters"},
				{Path: "provider_model", Msg: "required"},
				{Path: "backend", Msg: "required"},
			},
		},
		{
			name: "enums and numbers",
			mutate: func(e *usageevent.Event) {
				e.Protocol = "Gemini"
				e.Attempt = 0
				e.SendState = "sent"
				e.FailureStage = "Stream"
				e.HTTPStatus = 99
				e.RequestBytes = -1
				e.StartedAt = time.Time{}
			},
			want: []usageevent.Problem{
				{Path: "protocol", Msg: `must be "openai", "anthropic", "gemini" or "bedrock_converse"`},
				{Path: "attempt", Msg: "must be at least 1"},
				{Path: "send_state", Msg: `must be "definitely_not_sent", "possibly_sent" or "response_received"`},
				{Path: "failure_stage", Msg: "must be 1-64 of [a-z0-9_] starting with a letter"},
				{Path: "http_status", Msg: "must be 0 or 100-599, got 99"},
				{Path: "request_bytes", Msg: "must not be negative"},
				{Path: "started_at", Msg: "required"},
			},
		},
		{
			name: "times",
			mutate: func(e *usageevent.Event) {
				e.ResponseBytes = -1
				e.TTFBMs = math.NaN()
				e.DurationMs = -0.5
				e.HTTPStatus = 600
			},
			want: []usageevent.Problem{
				{Path: "http_status", Msg: "must be 0 or 100-599, got 600"},
				{Path: "response_bytes", Msg: "must not be negative"},
				{Path: "ttfb_ms", Msg: "must be finite"},
				{Path: "duration_ms", Msg: "must not be negative"},
			},
		},
		{
			name:   "stage too long",
			mutate: func(e *usageevent.Event) { e.FailureStage = "s" + strings.Repeat("x", usageevent.MaxStageLength) },
			want:   []usageevent.Problem{{Path: "failure_stage", Msg: "must be 1-64 of [a-z0-9_] starting with a letter"}},
		},
		{
			name: "success needs a response",
			mutate: func(e *usageevent.Event) {
				notSent(e)
				e.FailureStage = ""
			},
			want: []usageevent.Problem{{Path: "failure_stage", Msg: `required when send_state is not "response_received"`}},
		},
		{
			name: "nothing read without a response",
			mutate: func(e *usageevent.Event) {
				e.SendState, e.FailureStage = usageevent.SendPossiblySent, usageevent.StageSend
			},
			want: []usageevent.Problem{
				{Path: "response_bytes", Msg: `must be 0 when send_state is "possibly_sent"`},
				{Path: "ttfb_ms", Msg: `must be 0 when send_state is "possibly_sent"`},
				{Path: "usage", Msg: `must be null when send_state is "possibly_sent"`},
			},
		},
		{
			name:   "usage without provider usage",
			mutate: func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage("null") },
			want:   []usageevent.Problem{{Path: "provider_usage", Msg: "must be set when usage is set"}},
		},
		{
			name:   "provider usage without usage",
			mutate: func(e *usageevent.Event) { e.Usage = nil },
			want:   []usageevent.Problem{{Path: "usage", Msg: "must be set when provider_usage is set"}},
		},
		{
			name:   "provider usage not an object",
			mutate: func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`[1]`) },
			want:   []usageevent.Problem{{Path: "provider_usage", Msg: "must be a JSON object or null"}},
		},
		{
			name:   "provider usage not JSON",
			mutate: func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{"a":`) },
			want:   []usageevent.Problem{{Path: "provider_usage", Msg: "must be a JSON object or null"}},
		},
		{
			// bytes.TrimSpace would take \v for space; JSON does not.
			name:   "provider usage after a space JSON does not allow",
			mutate: func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage("\v{}") },
			want:   []usageevent.Problem{{Path: "provider_usage", Msg: "must be a JSON object or null"}},
		},
		{
			name:   "provider usage two objects",
			mutate: func(e *usageevent.Event) { e.ProviderUsage = json.RawMessage(`{"a":1} {"b":2}`) },
			want:   []usageevent.Problem{{Path: "provider_usage", Msg: "must be a JSON object or null"}},
		},
		{
			name: "negative counts",
			mutate: func(e *usageevent.Event) {
				e.Usage = &usageevent.Usage{InputTokens: -1, OutputTokens: -1, CacheReadTokens: -1, CacheWriteTokens: -1, ReasoningTokens: -1}
			},
			want: []usageevent.Problem{
				{Path: "usage.input_tokens", Msg: "must not be negative"},
				{Path: "usage.output_tokens", Msg: "must not be negative"},
				{Path: "usage.cache_read_tokens", Msg: "must not be negative"},
				{Path: "usage.cache_write_tokens", Msg: "must not be negative"},
				{Path: "usage.reasoning_tokens", Msg: "must not be negative"},
			},
		},
		{
			name: "parts above their wholes",
			mutate: func(e *usageevent.Event) {
				e.Usage = &usageevent.Usage{InputTokens: 10, CacheReadTokens: 6, CacheWriteTokens: 5, OutputTokens: 3, ReasoningTokens: 4}
			},
			want: []usageevent.Problem{
				{Path: "usage", Msg: "cache_read_tokens + cache_write_tokens must not exceed input_tokens (cache tokens are part of the input)"},
				{Path: "usage.reasoning_tokens", Msg: "must not exceed output_tokens (reasoning is part of the output)"},
			},
		},
		{
			name: "cache parts whose sum overflows",
			mutate: func(e *usageevent.Event) {
				e.Usage = &usageevent.Usage{InputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64, CacheWriteTokens: math.MaxInt64}
			},
			want: []usageevent.Problem{
				{Path: "usage", Msg: "cache_read_tokens + cache_write_tokens must not exceed input_tokens (cache tokens are part of the input)"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := validEvent()
			tc.mutate(e)
			err := e.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *usageevent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(ve.Problems, tc.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	var e *usageevent.Event
	var ve *usageevent.ValidationError
	if err := e.Validate(); !errors.As(err, &ve) {
		t.Fatalf("Validate() on nil = %v, want a *ValidationError", err)
	}
}

func TestValidationErrorMessage(t *testing.T) {
	e := validEvent()
	e.NodeID, e.RequestID, e.TenantID, e.KeyID = "", "", "", ""
	e.PublicModel, e.ProviderModel, e.Backend, e.Protocol = "", "", "", ""
	e.Attempt, e.SendState, e.HTTPStatus, e.RequestBytes = 0, "", 1, -1
	err := e.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want problems")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "usageevent: invalid event: node_id: required; ") {
		t.Errorf("message %q does not start with the first problem", msg)
	}
	if !strings.HasSuffix(msg, "; and 3 more") {
		t.Errorf("message %q does not end with the count of the problems left out", msg)
	}
}
