package usageevent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// examples returns the contract examples in testdata/usage by file name.
func examples(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/usage/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 5 {
		t.Fatalf("found %d examples in testdata/usage, want at least 5", len(paths))
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// asTree decodes JSON into maps and slices, for comparison regardless of
// member order and white space.
func asTree(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return v
}

// TestExamples checks every contract example: it decodes, validates, and
// encodes back to the same document, so an example has exactly the members
// the Go type writes.
func TestExamples(t *testing.T) {
	for name, data := range examples(t) {
		t.Run(name, func(t *testing.T) {
			e, err := usageevent.Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			out, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(asTree(t, out), asTree(t, data)); diff != "" {
				t.Errorf("re-encoded event differs from the example (-got +want):\n%s", diff)
			}
			if e.HasProviderUsage() && !bytes.Contains(data, bytes.TrimSpace(e.ProviderUsage)) {
				t.Errorf("provider_usage is not kept byte for byte: %s", e.ProviderUsage)
			}
		})
	}
}

// TestExamplesCoverage keeps the examples showing what the consumer guide
// promises: each send state, streams of both protocols, a cut and a
// cancelled stream, and an event without usage.
func TestExamplesCoverage(t *testing.T) {
	seen := map[string]bool{}
	for _, data := range examples(t) {
		e, err := usageevent.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		seen["send_state="+e.SendState] = true
		seen["failure_stage="+e.FailureStage] = true
		seen["protocol="+e.Protocol] = true
		if e.Stream {
			seen["stream/"+e.Protocol] = true
		}
		if e.Usage == nil {
			seen["no usage"] = true
		}
		if e.Usage != nil && e.Usage.CacheWriteTokens > 0 {
			seen["cache write"] = true
		}
	}
	for _, want := range []string{
		"send_state=" + usageevent.SendDefinitelyNotSent,
		"send_state=" + usageevent.SendPossiblySent,
		"send_state=" + usageevent.SendResponseReceived,
		"failure_stage=",
		"failure_stage=" + usageevent.StageStream,
		"failure_stage=" + usageevent.StageClientCancelled,
		"failure_stage=" + usageevent.StageSend,
		"stream/openai", "stream/anthropic", "protocol=openai",
		"no usage", "cache write",
	} {
		if !seen[want] {
			t.Errorf("no example with %s", want)
		}
	}
}

func TestDecode(t *testing.T) {
	valid, err := json.Marshal(validEvent())
	if err != nil {
		t.Fatal(err)
	}
	withMember := func(member string) []byte {
		return append([]byte(`{`+member+`,`), valid[1:]...)
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var invalid *usageevent.ValidationError
	tests := []struct {
		name    string
		data    []byte
		wantErr func(error) bool // nil = no error
	}{
		{name: "valid", data: valid},
		{name: "unknown members are ignored", data: withMember(`"added_in_a_later_node":{"x":[1]}`)},
		{name: "schema 3", data: bytes.Replace(valid, []byte(`"schema":2`), []byte(`"schema":3`), 1), wantErr: func(err error) bool { return errors.Is(err, usageevent.ErrUnsupportedSchema) }},
		{name: "schema missing", data: bytes.Replace(valid, []byte(`"schema":2,`), nil, 1), wantErr: func(err error) bool { return errors.Is(err, usageevent.ErrUnsupportedSchema) }},
		{name: "schema a string", data: bytes.Replace(valid, []byte(`"schema":2`), []byte(`"schema":"2"`), 1), wantErr: func(err error) bool { return errors.Is(err, usageevent.ErrUnsupportedSchema) }},
		{name: "syntax", data: valid[:len(valid)-1], wantErr: func(err error) bool { return errors.As(err, &syntax) }},
		{name: "trailing data", data: append(bytes.Clone(valid), " {}"...), wantErr: func(err error) bool { return errors.As(err, &syntax) }},
		{name: "not an object", data: []byte(`[1]`), wantErr: func(err error) bool { return errors.As(err, &typ) }},
		{name: "null", data: []byte(`null`), wantErr: func(err error) bool { return err != nil && !errors.Is(err, usageevent.ErrUnsupportedSchema) }},
		{name: "wrong type", data: bytes.Replace(valid, []byte(`"attempt":1`), []byte(`"attempt":"1"`), 1), wantErr: func(err error) bool { return errors.As(err, &typ) }},
		{name: "duplicate member", data: withMember(`"tenant_id":"t_other"`), wantErr: isDecodeError("tenant_id", "duplicate member (each name may appear once)")},
		{name: "member in another letter case", data: withMember(`"Tenant_ID":"t_other"`), wantErr: isDecodeError("Tenant_ID", `unknown member; did you mean "tenant_id"?`)},
		{name: "duplicate inside provider_usage", data: bytes.Replace(valid, []byte(`"provider_usage":{`), []byte(`"provider_usage":{"x":1,"x":2,`), 1), wantErr: isDecodeError("provider_usage.x", "duplicate member (each name may appear once)")},
		{name: "usage member in another letter case", data: bytes.Replace(valid, []byte(`"usage":{`), []byte(`"usage":{"INPUT_TOKENS":0,`), 1), wantErr: isDecodeError("usage.INPUT_TOKENS", `unknown member; did you mean "input_tokens"?`)},
		{name: "integer written with an exponent", data: bytes.Replace(valid, []byte(`"response_bytes":700`), []byte(`"response_bytes":1E87`), 1), wantErr: isTypeError("response_bytes", "expected an integer, got number 1E87")},
		{name: "integer beyond int64", data: bytes.Replace(valid, []byte(`"response_bytes":700`), []byte(`"response_bytes":9223372036854775808`), 1), wantErr: isTypeError("response_bytes", "expected an integer from -9223372036854775808 to 9223372036854775807, got number 9223372036854775808")},
		{name: "token count written with a fraction", data: bytes.Replace(valid, []byte(`"input_tokens":10`), []byte(`"input_tokens":10.0`), 1), wantErr: isTypeError("usage.input_tokens", "expected an integer, got number 10.0")},
		{name: "milliseconds beyond float64", data: bytes.Replace(valid, []byte(`"ttfb_ms":12.5`), []byte(`"ttfb_ms":1e400`), 1), wantErr: isTypeError("ttfb_ms", "expected a number within the range of a float64, got number 1e400")},
		{name: "schema written 2.0", data: bytes.Replace(valid, []byte(`"schema":2`), []byte(`"schema":2.0`), 1), wantErr: isTypeError("schema", "expected an integer, got number 2.0")},
		{name: "invalid meaning", data: bytes.Replace(valid, []byte(`"authoritative":false`), []byte(`"authoritative":true`), 1), wantErr: func(err error) bool { return errors.As(err, &invalid) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := usageevent.Decode(tc.data)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if diff := cmp.Diff(e, validEvent()); diff != "" {
					t.Errorf("event (-got +want):\n%s", diff)
				}
				return
			}
			if !tc.wantErr(err) || e != nil {
				t.Fatalf("Decode = %v, %v; not the error expected", e, err)
			}
		})
	}
}

// isTypeError matches a value its Go field cannot hold: a *DecodeError
// naming the member, which still unwraps to encoding/json's error.
func isTypeError(path, msg string) func(error) bool {
	return func(err error) bool {
		var de *usageevent.DecodeError
		var typ *json.UnmarshalTypeError
		return errors.As(err, &de) && de.Path == path && de.Msg == msg && errors.As(err, &typ)
	}
}

func isDecodeError(path, msg string) func(error) bool {
	return func(err error) bool {
		var de *usageevent.DecodeError
		return errors.As(err, &de) && de.Path == path && de.Msg == msg && de.Line == 1 && de.Column > 1
	}
}

// TestDecodeNullProviderUsage checks that a null provider_usage decodes to
// nil, so a decoded event without usage equals one built in Go.
func TestDecodeNullProviderUsage(t *testing.T) {
	want := validEvent()
	want.SendState, want.FailureStage, want.HTTPStatus = usageevent.SendDefinitelyNotSent, usageevent.StageConnect, 0
	want.ResponseBytes, want.TTFBMs, want.Usage, want.ProviderUsage = 0, 0, nil, nil
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"usage":null,"provider_usage":null}`)) {
		t.Fatalf("nil usage is not encoded as null members: %s", data)
	}
	got, err := usageevent.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("event (-got +want):\n%s", diff)
	}
}

// TestConsumerGuideExample keeps the event shown in docs/usage-consumers.md
// identical to the contract example it is copied from.
func TestConsumerGuideExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/usage-consumers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("```json\n"))
	block, _, ok2 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("no JSON example in docs/usage-consumers.md")
	}
	want := examples(t)["openai_nonstream_success.json"]
	if diff := cmp.Diff(asTree(t, block), asTree(t, want)); diff != "" {
		t.Errorf("guide example differs from testdata/usage/openai_nonstream_success.json (-guide +example):\n%s", diff)
	}
}

// TestDecodeBatch: a batched message is events as published singly, each
// ending in a newline; a cut message, an empty line or a bad event is an
// error naming its line, with the events before it returned.
func TestDecodeBatch(t *testing.T) {
	ex := examples(t)
	compact := func(name string) []byte {
		var b bytes.Buffer
		if err := json.Compact(&b, ex[name]); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := compact("openai_nonstream_success.json"), compact("openai_nonstream_success.json")
	b = bytes.Replace(b, []byte(`"event_id":"01a226bf`), []byte(`"event_id":"b1a226bf`), 1)
	join := func(lines ...[]byte) []byte {
		var out []byte
		for _, l := range lines {
			out = append(append(out, l...), '\n')
		}
		return out
	}
	evs, err := usageevent.DecodeBatch(join(a, b))
	if err != nil || len(evs) != 2 {
		t.Fatalf("DecodeBatch = %d events, %v", len(evs), err)
	}
	if evs[0].EventID[0] != '0' || evs[1].EventID[0] != 'b' {
		t.Errorf("events out of order: %s, %s", evs[0].EventID, evs[1].EventID)
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		line     int
		eventsOK int
	}{
		{"empty", nil, 1, 0},
		{"cut after the first event", append(join(a), b[:len(b)/2]...), 2, 0},
		{"no final newline", append(join(a), b...), 2, 0},
		{"empty line", join(a, nil, b), 2, 1},
		{"a bad event", join(a, []byte(`{"schema":2}`)), 2, 1},
		{"a twin member", join(bytes.Replace(a, []byte(`{`), []byte(`{"schema":2,`), 1)), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := usageevent.DecodeBatch(tc.data)
			var be *usageevent.BatchError
			if !errors.As(err, &be) || be.Line != tc.line {
				t.Fatalf("err = %v, want a BatchError at line %d", err, tc.line)
			}
			if len(evs) != tc.eventsOK {
				t.Errorf("%d events returned with the error, want %d", len(evs), tc.eventsOK)
			}
		})
	}
}
