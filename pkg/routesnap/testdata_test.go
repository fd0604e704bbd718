package routesnap_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
)

// fixtures is the shared contract examples directory.
const fixtures = "../../testdata/routesnap"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestValidFixture(t *testing.T) {
	s, err := routesnap.Decode(readFixture(t, "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Version, uint64(42)); diff != "" {
		t.Errorf("version (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(s.GeneratedAt, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)); diff != "" {
		t.Errorf("generated_at (-got +want):\n%s", diff)
	}
	if len(s.Backends) != 3 || len(s.Models) != 5 {
		t.Errorf("got %d backends and %d models, want 3 and 5 (two of them patterns)", len(s.Backends), len(s.Models))
	}
}

// TestFallbacksFixture: the schema 2 example of fallbacks and context
// windows is valid, and decodes every member.
func TestFallbacksFixture(t *testing.T) {
	s, err := routesnap.Decode(readFixture(t, "valid-fallbacks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Models[0].Fallbacks, []string{"gpt-4o-azure", "gpt-4o-mini"}); diff != "" {
		t.Errorf("fallbacks (-got +want):\n%s", diff)
	}
	tg := s.Models[0].Targets[0]
	if tg.ContextWindow == nil || *tg.ContextWindow != 128000 || tg.MaxOutputTokens == nil || *tg.MaxOutputTokens != 16384 {
		t.Errorf("context window: got %v, %v; want 128000, 16384", tg.ContextWindow, tg.MaxOutputTokens)
	}
}

// TestInvalidFixtures is the golden table for testdata/routesnap/invalid:
// each file is rejected with exactly these problems, and every file there
// has a row.
func TestInvalidFixtures(t *testing.T) {
	type decodeErr struct {
		Path         string
		Line, Column int
		Msg          string
	}
	tests := map[string]struct {
		decode   *decodeErr          // Decode fails like this, or
		validate []routesnap.Problem // Validate reports exactly these
	}{
		"truncated.json":           {decode: &decodeErr{Line: 17, Column: 18, Msg: "unexpected end of document (truncated?)"}},
		"trailing-garbage.json":    {decode: &decodeErr{Line: 2, Column: 1, Msg: "unexpected data after the document"}},
		"unknown-field.json":       {decode: &decodeErr{Path: "models[0].targets[0].wieght", Line: 8, Column: 65, Msg: "unknown member"}},
		"case-base-url.json":       {decode: &decodeErr{Path: "backends[0].BASE_URL", Line: 10, Column: 7, Msg: `unknown member; did you mean "base_url"?`}},
		"case-models.json":         {decode: &decodeErr{Path: "MODELS", Line: 29, Column: 3, Msg: `unknown member; did you mean "models"?`}},
		"case-target-backend.json": {decode: &decodeErr{Path: "models[2].targets[0].Backend", Line: 46, Column: 11, Msg: `unknown member; did you mean "backend"?`}},
		"long-s-schema.json":       {decode: &decodeErr{Path: `["\u017fchema"]`, Line: 2, Column: 3, Msg: `unknown member; did you mean "schema"?`}},
		"invalid-utf8.json":        {decode: &decodeErr{Path: "models[2].name", Line: 46, Column: 19, Msg: "invalid UTF-8 in a string"}},
		"duplicate-version.json":   {decode: &decodeErr{Path: "version", Line: 4, Column: 3, Msg: "duplicate member (each name may appear once)"}},
		"duplicate-weight.json":    {decode: &decodeErr{Path: "models[0].targets[1].weight", Line: 34, Column: 79, Msg: "duplicate member (each name may appear once)"}},
		"version-string.json":      {decode: &decodeErr{Path: "version", Msg: "expected a non-negative integer, got string"}},
		"null-target.json":         {decode: &decodeErr{Path: "models[0].targets[0]", Msg: "expected an object, got null"}},
		"bad-schema.json": {validate: []routesnap.Problem{
			{Path: "schema", Msg: "must be 1..2, got 3"},
			{Path: "version", Msg: "must be at least 1"},
		}},
		"empty.json": {validate: []routesnap.Problem{
			{Path: "backends", Msg: "must list at least one backend"},
			{Path: "models", Msg: "must list at least one model"},
		}},
		"missing-members.json": {validate: []routesnap.Problem{
			{Path: "backends", Msg: "required"},
			{Path: "models", Msg: "required"},
		}},
		"duplicates.json": {validate: []routesnap.Problem{
			{Path: "backends[1].id", Msg: "duplicate of backends[0]"},
			{Path: "models[0].targets[1]", Msg: "duplicate of targets[0] (same backend and model); merge their weights"},
			{Path: "models[1].name", Msg: "duplicate of models[0]"},
		}},
		"patterns.json": {validate: []routesnap.Problem{
			{Path: "models[0].targets[0].model", Msg: `"*" stands for what a pattern's star matched, and this model's name is no pattern (a name that ends in "*")`},
			{Path: "models[2].name", Msg: `duplicate of models[1]: two patterns with the same prefix "claude-" match the same names`},
		}},
		"fallbacks.json": {validate: []routesnap.Problem{
			{Path: "models[6].targets[0].max_output_tokens", Msg: "must be at most context_window (1000), got 4000"},
			{Path: "models[2].fallbacks[1]", Msg: `model "claude" speaks anthropic, this model openai; a fallback never converts between protocols`},
			{Path: "models[2].fallbacks[2]", Msg: "names this model itself"},
			{Path: "models[2].fallbacks[3]", Msg: "must name a model, not a pattern: a fallback serves under one name of the routes"},
			{Path: "models[2].fallbacks[4]", Msg: `unknown model "gone"`},
			{Path: "models[5].fallbacks", Msg: "a model with fallbacks must have targets of one protocol; this one has anthropic, openai"},
			{Path: "models[0].fallbacks", Msg: `cycle: "a" → "b" → "c" → "a"; a chain is walked once and must end`},
			{Path: "models[1].fallbacks", Msg: `cycle: "b" → "c" → "b"; a chain is walked once and must end`},
		}},
		"fallbacks-ranges.json": {validate: []routesnap.Problem{
			{Path: "models[2].targets[0].context_window", Msg: "must be 1..1073741824, got 0"},
			{Path: "models[2].targets[0].max_output_tokens", Msg: "must be 1..1073741824, got 1073741825"},
			{Path: "models[0].fallbacks[1]", Msg: "duplicate of fallbacks[0]"},
			{Path: "models[1].fallbacks", Msg: "must list at least one model, or be left out"},
		}},
		"schema1-fallbacks.json": {validate: []routesnap.Problem{
			{Path: "models[0].targets[0].context_window", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
			{Path: "models[0].targets[0].max_output_tokens", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
			{Path: "models[0].fallbacks", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		}},
		"gemini-names.json": {validate: []routesnap.Problem{
			{Path: "models[1].name", Msg: gemName},
			{Path: "models[2].targets[0].model", Msg: gemModel},
		}},
		"endpoints.json": {validate: []routesnap.Problem{
			{Path: "backends[0].endpoints[1]", Msg: `unknown endpoint "messages" for protocol "openai"; expected one of chat_completions, responses, embeddings, responses_compact, responses_input_tokens, completions, rerank, audio_speech, audio_transcriptions, audio_translations, image_generations, image_edits, realtime`},
			{Path: "backends[0].endpoints[2]", Msg: "duplicate of endpoints[0]"},
			{Path: "backends[1].endpoints", Msg: "must list at least one endpoint, or be left out for the protocol's default"},
		}},
		// A schema 2 endpoint in a schema 1 document.
		"realtime-schema1.json": {validate: []routesnap.Problem{
			{Path: "backends[0].endpoints[1]", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		}},
		// The Gemini Live endpoint, new in schema 2, in a schema 1 document.
		"live-schema1.json": {validate: []routesnap.Problem{
			{Path: "backends[0].endpoints[1]", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		}},
		"references.json": {validate: []routesnap.Problem{
			{Path: "models[0].targets", Msg: "must list at least one target (an empty pool can serve nothing)"},
			{Path: "models[1].targets", Msg: "must list at least one target (an empty pool can serve nothing)"},
			{Path: "models[2].targets[0].backend", Msg: `unknown backend "gone"`},
			{Path: "models[2].targets[1].backend", Msg: "must be a backend id: 1-64 characters from [A-Za-z0-9._-]"},
		}},
		"ranges.json": {validate: []routesnap.Problem{
			{Path: "backends[0].protocol", Msg: `must be "openai", "anthropic", "gemini" or "bedrock_converse"`},
			{Path: "backends[0].credential", Msg: "must be a credential name: 1-64 characters from [A-Za-z0-9._-]"},
			{Path: "backends[0].max_inflight_per_node", Msg: "must be 1..100000, got 0"},
			{Path: "backends[1].id", Msg: "must be 1-64 characters from [A-Za-z0-9._-]"},
			{Path: "backends[1].credential", Msg: "must be a credential name: 1-64 characters from [A-Za-z0-9._-]"},
			{Path: "backends[1].max_inflight_per_node", Msg: "must be 1..100000, got 100001"},
			{Path: "models[0].name", Msg: "must not be empty"},
			{Path: "models[0].targets[0].model", Msg: "must not be empty"},
			{Path: "models[0].targets[0].weight", Msg: "must be 1..1000000, got 0"},
			{Path: "models[0].targets[0].tier", Msg: "must be 0..2147483647, got -1"},
			{Path: "models[1].name", Msg: "must not contain control characters"},
			{Path: "models[1].targets[0].weight", Msg: "must be 1..1000000, got 1000001"},
		}},
		"prices.json": {validate: []routesnap.Problem{
			{Path: "models[0].targets[0].price.input", Msg: `"3.5e0" is not a non-negative decimal: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
			{Path: "models[0].targets[0].price.output", Msg: `"-1" is not a non-negative decimal: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
			{Path: "models[0].targets[0].price.cache_read", Msg: `"0.0000001" has too many digits after the point: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
			{Path: "models[1].targets[0].price.input", Msg: `required: a price in USD per million tokens, a decimal string such as "3.75"`},
			{Path: "models[1].targets[0].price.output", Msg: `"200000" is too large: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
			{Path: "models[1].targets[0].price.long_context.above_input_tokens", Msg: "must be 1..9223372036854775807, got 0"},
			{Path: "models[1].targets[0].price.long_context.cache_write", Msg: `".5" is not a non-negative decimal: want a price in USD per million tokens, a decimal string such as "3.75" with at most 6 digits after the point, up to 100000`},
		}},
		"prices-schema1.json": {validate: []routesnap.Problem{
			{Path: "models[0].targets[0].price", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"},
		}},
		"urls.json": {validate: []routesnap.Problem{
			{Path: "backends[0].base_url", Msg: "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)"},
			{Path: "backends[1].base_url", Msg: "link-local address; not allowed (cloud metadata services live there)"},
			{Path: "backends[2].base_url", Msg: "cloud metadata service host; not allowed"},
			{Path: "backends[3].base_url", Msg: "link-local address; not allowed (cloud metadata services live there)"},
			{Path: "backends[4].base_url", Msg: "must not contain user info; the backend's credential is named by credential"},
			{Path: "backends[5].base_url", Msg: "must not have a query or fragment"},
			{Path: "backends[6].base_url", Msg: "numeric host that is not a valid IP address"},
			{Path: "backends[7].base_url", Msg: "expected an https:// URL (http:// only for a loopback host)"},
		}},
	}

	files, err := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	var want []string
	for name := range tests {
		want = append(want, name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(names, want); diff != "" {
		t.Errorf("invalid fixtures and table rows differ (-files +rows):\n%s", diff)
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := routesnap.Decode(readFixture(t, filepath.Join("invalid", name)))
			if tt.decode != nil {
				var de *routesnap.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("Decode error = %v, want a *DecodeError", err)
				}
				if diff := cmp.Diff(decodeErr{de.Path, de.Line, de.Column, de.Msg}, *tt.decode); diff != "" {
					t.Errorf("DecodeError mismatch (-got +want):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			var ve *routesnap.ValidationError
			if err := s.Validate(); !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(ve.Problems, tt.validate); diff != "" {
				t.Errorf("problems mismatch (-got +want):\n%s", diff)
			}
			if strings.Contains(ve.Error(), "pass@") || strings.Contains(ve.Error(), "key=x") {
				t.Errorf("error repeats a URL: %s", ve)
			}
		})
	}
}

// TestMarshalRoundTrip: what a control plane publishes with encoding/json
// decodes back to the same value.
func TestMarshalRoundTrip(t *testing.T) {
	s := valid()
	s.GeneratedAt = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := routesnap.Decode(data)
	if err != nil {
		t.Fatalf("Decode(Marshal(s)): %v\n%s", err, data)
	}
	if diff := cmp.Diff(got, s); diff != "" {
		t.Errorf("round trip mismatch (-got +want):\n%s", diff)
	}
}
