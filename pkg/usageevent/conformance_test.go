package usageevent_test

import (
	"bytes"
	"errors"
	"regexp"
	"testing"

	"github.com/scootgate/scootgate/internal/schematest"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// eventRules are the rules Decode (with Validate) enforces beyond
// proto/usage-event.schema.json, matched against its error text: the two
// token sums a schema cannot add up, and the integer spelling the JSON
// data model cannot see (1.0 is the integer 1 to a schema validator).
var eventRules = []struct {
	name string
	re   *regexp.Regexp
}{
	{"cache_read_tokens + cache_write_tokens <= input_tokens", regexp.MustCompile(`usage: cache_read_tokens \+ cache_write_tokens must not exceed input_tokens`)},
	{"reasoning_tokens <= output_tokens", regexp.MustCompile(`usage\.reasoning_tokens: must not exceed output_tokens`)},
	{"cost.usd <= 9223372 (the largest pkg/usd amount)", regexp.MustCompile(`cost\.usd: must be at most 9223372 \(US dollars\)`)},
	// Only a number written with a fraction or an exponent: an integer
	// out of the Go type's range is the schema's maximum, not this rule.
	{"an integer member is written without a fraction or exponent", regexp.MustCompile(`^usageevent: decode: [a-z_]+(\.[a-z_]+)*: expected an integer, got number -?[0-9]+(\.[0-9]+([eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)$`)},
}

// explained reports which rule err is, or "".
func explained(err error) string {
	var ve *usageevent.ValidationError
	if errors.As(err, &ve) {
		name := ""
		for _, p := range ve.Problems {
			n := ""
			for _, r := range eventRules {
				if r.re.MatchString(p.String()) {
					n = r.name
				}
			}
			if n == "" {
				return ""
			}
			name = n
		}
		return name
	}
	for _, r := range eventRules {
		if r.re.MatchString(err.Error()) {
			return r.name
		}
	}
	return ""
}

// eventDocs are the usage examples and hostile variants of one of them.
func eventDocs(t *testing.T) map[string][]byte {
	docs := examples(t)
	base := docs["openai_nonstream_success.json"]
	if base == nil {
		t.Fatal("openai_nonstream_success.json is missing")
	}
	edit := func(old, new string) []byte {
		t.Helper()
		if !bytes.Contains(base, []byte(old)) {
			t.Fatalf("example has no %q", old)
		}
		return bytes.Replace(base, []byte(old), []byte(new), 1)
	}
	for name, d := range map[string][]byte{
		"(built) duplicate tenant_id":           edit(`"tenant_id":`, `"tenant_id": "t_other", "tenant_id":`),
		"(built) Tenant_ID beside tenant_id":    edit(`"tenant_id":`, `"Tenant_ID": "t_other", "tenant_id":`),
		"(built) \\u017fchema beside schema":    edit(`"schema":`, `"\u017fchema": 3, "schema":`),
		"(built) INPUT_TOKENS in usage":         edit(`"input_tokens":`, `"INPUT_TOKENS": 0, "input_tokens":`),
		"(built) duplicate in provider_usage":   edit(`"provider_usage": {`, `"provider_usage": {"x": 1, "x": 2,`),
		"(built) unknown member":                edit(`"tenant_id":`, `"added_later": {"a": [1]}, "tenant_id":`),
		"(built) attempt written 1.0":           edit(`"attempt": 1`, `"attempt": 1.0`),
		"(built) schema written 2.0":            edit(`"schema": 2`, `"schema": 2.0`),
		"(built) response_bytes written 1E87":   edit(`"response_bytes": 1187`, `"response_bytes": 1E87`),
		"(built) response_bytes above int64":    edit(`"response_bytes": 1187`, `"response_bytes": 9223372036854775808`),
		"(built) response_bytes at int64 max":   edit(`"response_bytes": 1187`, `"response_bytes": 9223372036854775807`),
		"(built) input_tokens above int64":      edit(`"input_tokens": `, `"input_tokens": 99999999999999999999, "x": `),
		"(built) attempt above int32":           edit(`"attempt": 1`, `"attempt": 2147483648`),
		"(built) ttfb_ms beyond float64":        edit(`"ttfb_ms": `, `"ttfb_ms": 1e400, "x": `),
		"(built) ttfb_ms rounding to max float": edit(`"ttfb_ms": `, `"ttfb_ms": 1.7976931348623158e308, "x": `),
		"(built) lowercase z in started_at":     edit(`Z"`, `z"`),
		"(built) escaped T in started_at":       edit(`T`, `\u0054`),
		"(built) one-digit hour in started_at":  regexp.MustCompile(`T\d\d:`).ReplaceAll(base, []byte("T1:")),
		"(built) reasoning above output tokens": edit(`"reasoning_tokens": 0`, `"reasoning_tokens": 999999`),
		"(built) cache reads above input":       edit(`"cache_read_tokens": 1024`, `"cache_read_tokens": 999999`),
		"(built) cost":                          edit(`"tenant_id":`, `"cost": {"usd": "0.0105", "price_version": 7, "estimated": false}, "tenant_id":`),
		"(built) cost above usd.Max":            edit(`"tenant_id":`, `"cost": {"usd": "9999999", "price_version": 7, "estimated": false}, "tenant_id":`),
		"(built) cost with a trailing zero":     edit(`"tenant_id":`, `"cost": {"usd": "0.10", "price_version": 7, "estimated": false}, "tenant_id":`),
		"(built) cost as a number":              edit(`"tenant_id":`, `"cost": {"usd": 0.1, "price_version": 7, "estimated": false}, "tenant_id":`),
		"(built) estimated cost with usage":     edit(`"tenant_id":`, `"cost": {"usd": "0.1", "price_version": 7, "estimated": true}, "tenant_id":`),
		"(built) empty model_pattern":           edit(`"tenant_id":`, `"model_pattern": "", "tenant_id":`),
		"(built) empty served_model":            edit(`"served_model": "demo-gpt"`, `"served_model": ""`),
		"(built) empty endpoint":                edit(`"endpoint": "chat_completions"`, `"endpoint": ""`),
		"(built) empty platform":                edit(`"platform": "openai"`, `"platform": ""`),
		"(built) empty region":                  edit(`"tenant_id":`, `"region": "", "tenant_id":`),
		"(built) empty placement":               edit(`"tenant_id":`, `"placement": "", "tenant_id":`),
		"(built) USD in cost":                   edit(`"tenant_id":`, `"cost": {"USD": "1", "usd": "0.1", "price_version": 7, "estimated": false}, "tenant_id":`),
	} {
		docs[name] = d
	}
	return docs
}

// TestSchemaConformance runs every usage example, and hostile variants,
// through a JSON Schema validator with proto/usage-event.schema.json and
// through Decode: what the schema rejects Decode rejects, and what the
// schema accepts Decode rejects only for eventRules, each of which some
// document exercises.
func TestSchemaConformance(t *testing.T) {
	schema := schematest.MustLoad("../../proto/usage-event.schema.json")
	used := map[string]bool{}
	for name, d := range eventDocs(t) {
		schemaErr := schema.Check(d)
		_, err := usageevent.Decode(d)
		switch {
		case schemaErr != nil && err == nil:
			t.Errorf("%s: the schema rejects it (%s), Decode accepts it", name, schematest.Short(schemaErr))
		case schemaErr == nil && err != nil:
			rule := explained(err)
			if rule == "" {
				t.Errorf("%s: the schema accepts it, Decode rejects it for a rule not accounted for: %v", name, err)
			}
			used[rule] = true
		}
	}
	for _, r := range eventRules {
		if !used[r.name] {
			t.Errorf("rule %q is exercised by no document", r.name)
		}
	}
}

// FuzzSchemaConformance is TestSchemaConformance on generated events.
func FuzzSchemaConformance(f *testing.F) {
	for _, d := range eventDocs(&testing.T{}) {
		f.Add(d)
	}
	schema := schematest.MustLoad("../../proto/usage-event.schema.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		schemaErr := schema.Check(data)
		_, err := usageevent.Decode(data)
		switch {
		case schemaErr != nil && err == nil:
			t.Fatalf("the schema rejects %q (%s), Decode accepts it", data, schematest.Short(schemaErr))
		case schemaErr == nil && err != nil && explained(err) == "":
			t.Fatalf("the schema accepts %q, Decode rejects it for a rule not accounted for: %v", data, err)
		}
	})
}
