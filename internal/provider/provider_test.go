package provider_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestNamesMatchContracts keeps the endpoint and protocol names of the
// node, of routing snapshots and of the catalog in step.
func TestNamesMatchContracts(t *testing.T) {
	for p := range provider.NumProtocols {
		if got, want := provider.EndpointNames(p), routesnap.Endpoints(p.String()); !slices.Equal(got, want) {
			t.Errorf("%v endpoints: node %v, routesnap %v", p, got, want)
		}
		d := provider.DefaultEndpoints(p).String()
		if n := strings.Count(d, ",") + 1; d != strings.Join(routesnap.Endpoints(p.String())[:n], ",") {
			t.Errorf("%v default endpoints %q, routesnap lists %v first", p, d, routesnap.Endpoints(p.String())[:n])
		}
	}
	for e := range provider.NumEndpoints {
		spec := catalog.Spec(e)
		if spec == nil || spec.Endpoint != e {
			t.Fatalf("catalog.Spec(%v) = %v", e, spec)
		}
		if spec.Path != "" { // an endpoint with neither Path nor Match is reached by its doors
			if got, _ := catalog.ByPath(spec.Path); got != spec {
				t.Errorf("ByPath(%q) is not the %v spec", spec.Path, e)
			}
		}
		// An endpoint whose path names the model: the client path is the
		// upstream path under the API version, the model in it.
		for _, v := range []string{"/v1beta", "/v1"} {
			if spec.Match == nil {
				break
			}
			path := v + strings.Replace(spec.UpstreamPath, "{model}", "m-1", 1)
			if got, m := catalog.ByPath(path); got != spec || m != "m-1" {
				t.Errorf("ByPath(%q) = %v, %q; want the %v spec and m-1", path, got, m, e)
			}
		}
		if got, ok := provider.ParseEndpoint(e.String()); !ok || got != e {
			t.Errorf("ParseEndpoint(%q) = %v, %v", e.String(), got, ok)
		}
	}
}

// TestSessionHeadersStayHome: the headers agent clients name their session
// in never reach a provider (they are not in any allowlist).
func TestSessionHeadersStayHome(t *testing.T) {
	for e := range provider.NumEndpoints {
		spec := catalog.Spec(e)
		client := http.Header{}
		for _, s := range catalog.Spec(provider.Responses).SessionHeaders {
			client.Set(s, "sess-1")
		}
		for _, s := range catalog.Spec(provider.Messages).SessionHeaders {
			client.Set(s, "sess-1")
		}
		for _, s := range catalog.Spec(provider.Chat).SessionHeaders {
			client.Set(s, "sess-1")
		}
		client.Set("X-Codex-Turn-Metadata", `{"session_id":"sess-1"}`)
		client.Set("X-Client-Request-Id", "sess-1")
		for k, v := range spec.Header(client, "cred") {
			if slices.Contains(v, "sess-1") || strings.Contains(strings.Join(v, ","), "sess-1") {
				t.Errorf("%v forwards %s", e, k)
			}
		}
	}
}

// TestSession: the body's session member comes first (a plain JSON string
// by its contents, anything else by its bytes; null and "" are none), then
// the endpoint's session headers in order.
func TestSession(t *testing.T) {
	names := []string{"Session-Id", "Thread-Id"}
	tests := []struct {
		name       string
		key        string
		hdr        http.Header
		wantBody   string
		wantHeader string
	}{
		{"string", `"s-1"`, nil, "s-1", ""},
		{"escaped string kept whole", `"s\u002d1"`, nil, `"s\u002d1"`, ""},
		{"object by its bytes", `{"a":1}`, nil, `{"a":1}`, ""},
		{"body before headers", `"s-1"`, http.Header{"Session-Id": {"h"}}, "s-1", ""},
		{"null is none", `null`, http.Header{"Session-Id": {"h"}}, "", "h"},
		{"empty string is none", `""`, http.Header{"Thread-Id": {"t"}}, "", "t"},
		{"header order", ``, http.Header{"Thread-Id": {"t"}, "Session-Id": {"h"}}, "", "h"},
		{"empty header skipped", ``, http.Header{"Session-Id": {""}, "Thread-Id": {"t"}}, "", "t"},
		{"other headers ignored", ``, http.Header{"X-Claude-Code-Session-Id": {"c"}}, "", ""},
		{"none", ``, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := provider.Request{}
			if tt.key != "" {
				r.SessionKey = []byte(tt.key)
			}
			body, header := provider.Session(&r, tt.hdr, names)
			if string(body) != tt.wantBody || header != tt.wantHeader {
				t.Errorf("Session = %q, %q; want %q, %q", body, header, tt.wantBody, tt.wantHeader)
			}
		})
	}
	r := provider.Request{SessionKey: []byte(`"s-1"`)}
	h := http.Header{"Session-Id": {"h"}}
	if n := testing.AllocsPerRun(100, func() { provider.Session(&r, h, names) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestSendStateNames: the send states are written with the usage event's
// names, and a value outside the set never passes for one of them.
func TestSendStateNames(t *testing.T) {
	want := map[provider.SendState]string{
		provider.NoAttempt:        "none",
		provider.NotSent:          usageevent.SendDefinitelyNotSent,
		provider.PossiblySent:     usageevent.SendPossiblySent,
		provider.ResponseReceived: usageevent.SendResponseReceived,
		provider.NumSendStates:    "send_state(4)",
		provider.SendState(200):   "send_state(200)",
	}
	for s, w := range want {
		if got := s.String(); got != w {
			t.Errorf("SendState(%d).String() = %q, want %q", uint8(s), got, w)
		}
	}
}

// TestRewrite: the edits of an attempt, in any order of discovery, applied
// in one copy; no copy at all when there is nothing to edit.
func TestRewrite(t *testing.T) {
	body := []byte(`{"a":{"model":"models/pub"},"model":"pub","b":[{"model":"models/pub"}],"stream":true}`)
	r := provider.Request{
		ModelAt:  [2]int{36, 41},
		Named:    [][2]int{{14, 26}, {56, 68}},
		AskUsage: provider.Edit{At: 84, End: 84, Value: []byte(`,"x":1`)},
	}
	if string(body[36:41]) != `"pub"` || string(body[14:26]) != `"models/pub"` || string(body[56:68]) != `"models/pub"` || body[84] != '}' {
		t.Fatal("test offsets do not match the body")
	}
	tests := []struct {
		name         string
		model, named []byte
		ask          bool
		want         string
	}{
		{"all", []byte(`"real"`), []byte(`"models/real"`), true,
			`{"a":{"model":"models/real"},"model":"real","b":[{"model":"models/real"}],"stream":true,"x":1}`},
		{"model in the path", nil, []byte(`"models/real"`), false,
			`{"a":{"model":"models/real"},"model":"pub","b":[{"model":"models/real"}],"stream":true}`},
	}
	for _, tt := range tests {
		if got := string(r.Rewrite(body, tt.model, tt.named, tt.ask)); got != tt.want {
			t.Errorf("%s: Rewrite = %s, want %s", tt.name, got, tt.want)
		}
	}
	none := provider.Request{}
	if got := none.Rewrite(body, nil, nil, true); &got[0] != &body[0] {
		t.Error("nothing to edit, but the body was copied")
	}
}
