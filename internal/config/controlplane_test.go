package config

import (
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
)

// staticRoutes is the [backends]/[models] part of base.
const staticRoutes = `[backends.b1]
protocol = "openai"
base_url = "https://api.example.com/v1"
credential = "c1"
max_inflight_per_node = 8

[models.m1]
[[models.m1.targets]]
backend = "b1"
model = "real-1"
weight = 1
`

func TestRulesControlPlane(t *testing.T) {
	cp := func(c *Config) any { return c.ControlPlane }
	def := Defaults().ControlPlane
	with := func(f func(*ControlPlane)) ControlPlane {
		c := def
		f(&c)
		return c
	}
	runRules(t, []ruleCase{
		{name: "defaults", view: cp, wantView: def},
		{
			name: "every key",
			add: "[control_plane]\ntoken = { env = \"C2\" }\nca_file = \"/ca.pem\"\nclient_cert_file = \"/tls/cert.pem\"\nclient_key_file = \"/tls/key.pem\"\n" +
				"poll_interval = \"2s\"\nlong_poll = \"30s\"\nlong_poll_silence = \"5s\"\nstale_after = \"36s\"\nstate_dir = \"/var/lib/scootgate\"\n",
			view: cp,
			wantView: ControlPlane{
				Token: secret.New("k2"), CAFile: "/ca.pem", ClientCertFile: "/tls/cert.pem", ClientKeyFile: "/tls/key.pem",
				PollInterval: 2 * time.Second, LongPoll: 30 * time.Second, LongPollSilence: 5 * time.Second, StaleAfter: 36 * time.Second, StateDir: "/var/lib/scootgate",
			},
		},
		{
			name: "long poll off",
			add:  "[control_plane]\nlong_poll = \"0s\"\n",
			view: cp, wantView: def,
		},
		{
			name: "poll interval under a second",
			add:  "[control_plane]\npoll_interval = \"500ms\"\n",
			want: []Problem{{"control_plane.poll_interval", "500ms is too small; expected at least 1s"}},
		},
		{
			name: "long poll in fractions of a second",
			add:  "[control_plane]\nlong_poll = \"1500ms\"\n",
			want: []Problem{{"control_plane.long_poll", "1.5s is not whole seconds; expected 0 (off) or a whole number of seconds (it is sent as ?wait=<seconds>)"}},
		},
		{
			name: "long_poll_silence out of range",
			add:  "[control_plane]\nlong_poll_silence = \"1500ms\"\n",
			want: []Problem{{"control_plane.long_poll_silence", "1.5s is too small; expected at least 2s"}},
		},
		{
			name: "long_poll_silence too long",
			add:  "[control_plane]\nlong_poll_silence = \"61s\"\n",
			want: []Problem{{"control_plane.long_poll_silence", "1m1s is out of range; expected whole seconds from 2s to 1m0s"}},
		},
		{
			name: "stale_after shorter than three polls and the long poll",
			add:  "[control_plane]\npoll_interval = \"10s\"\nlong_poll = \"60s\"\nstale_after = \"89s\"\n",
			want: []Problem{{"control_plane.stale_after", "1m29s is too small; expected at least 3 × poll_interval + long_poll = 1m30s, so that a couple of slow polls do not make the node unready"}},
		},
		{
			name: "stale_after exactly three polls and the long poll",
			add:  "[control_plane]\npoll_interval = \"10s\"\nlong_poll = \"60s\"\nstale_after = \"90s\"\n",
			view: cp, wantView: with(func(c *ControlPlane) { c.LongPoll, c.StaleAfter = time.Minute, 90*time.Second }),
		},
		{
			name: "client certificate without key, token pasted as a string, missing CA, empty state dir",
			add: "[control_plane]\ntoken = \"sk-pasted-token\"\nca_file = \"/missing.pem\"\nclient_cert_file = \"/tls/cert.pem\"\n" +
				"state_dir = \"\"\nwait = \"1s\"\n",
			want: []Problem{
				{"control_plane.token", `expected a secret reference { env = "NAME" } or { file = "PATH" }, got a string`},
				{"control_plane.ca_file", "cannot read: open /missing.pem: file does not exist"},
				{"control_plane.client_key_file", "missing; set together with control_plane.client_cert_file"},
				{"control_plane.state_dir", "expected a directory path (the last good snapshots are kept there, docs/snapshots.md)"},
				{"control_plane.wait", "unknown key; expected one of: ca_file, client_cert_file, client_key_file, long_poll, long_poll_silence, poll_interval, stale_after, state_dir, token"},
			},
		},
		{
			name: "mismatched client key",
			add:  "[control_plane]\nclient_cert_file = \"/tls/cert.pem\"\nclient_key_file = \"/tls/other-key.pem\"\n",
			want: []Problem{{"control_plane.client_cert_file", "not a usable PEM certificate and key pair: tls: private key does not match public key"}},
		},
	})
}

func TestRulesRoutesSource(t *testing.T) {
	routes := func(c *Config) any {
		return struct {
			Routes           Routes
			Backends, Models int
		}{c.Routes, len(c.Backends), len(c.Models)}
	}
	type view = struct {
		Routes           Routes
		Backends, Models int
	}
	noStatic := []string{staticRoutes, ""}
	const notAllowed = "not allowed when routes.source is a snapshot: backends and models come from the routing snapshot (which names credentials defined in [credentials])"
	runRules(t, []ruleCase{
		{name: "static by default", view: routes, wantView: view{Routes{Source: "static"}, 1, 1}},
		{name: "static spelled out", add: "[routes]\nsource = \"static\"\n", view: routes, wantView: view{Routes{Source: "static"}, 1, 1}},
		{
			name: "https snapshot", edits: noStatic, add: "[routes]\nsource = \"https://cp.example.com/v1/routes\"\n",
			view: routes, wantView: view{Routes{Source: "https://cp.example.com/v1/routes"}, 0, 0},
		},
		{
			name: "file snapshot", edits: noStatic, add: "[routes]\nsource = \"file:///etc/sg/routes.json\"\n",
			view: routes, wantView: view{Routes{Source: "file:/etc/sg/routes.json"}, 0, 0},
		},
		{
			name: "loopback http snapshot", edits: noStatic, add: "[routes]\nsource = \"http://[::1]:9000/routes\"\n",
			view: routes, wantView: view{Routes{Source: "http://[::1]:9000/routes"}, 0, 0},
		},
		{
			name: "snapshot plus static routes", add: "[routes]\nsource = \"file:routes.json\"\n",
			want: []Problem{{"backends", notAllowed}, {"models", notAllowed}},
		},
		{
			name: "snapshot routes without any credentials", edits: append(noStatic, "[credentials.c1]\nenv = \"C1\"\n"+credHosts+"\n", ""),
			add:  "[routes]\nsource = \"file:routes.json\"\n",
			view: routes, wantView: view{Routes{Source: "file:routes.json"}, 0, 0},
		},
		{
			name: "plaintext to a remote control plane", edits: noStatic, add: "[routes]\nsource = \"http://cp.example.com/routes\"\n",
			want: []Problem{{"routes.source", "plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https://"}},
		},
		{
			name: "credentials in the URL are not repeated", edits: noStatic, add: "[routes]\nsource = \"https://u:sk-hunter2@cp.example.com/routes\"\n",
			want: []Problem{{"routes.source", "must not contain credentials; set control_plane.token instead"}},
		},
		{
			name: "query", edits: noStatic, add: "[routes]\nsource = \"https://cp.example.com/routes?token=sk-hunter2\"\n",
			want: []Problem{{"routes.source", "must not have a query or fragment"}},
		},
		{
			// A source that cannot be read says nothing about intent: no
			// cascade of backends/models problems.
			name: "unknown source with static routes", add: "[routes]\nsource = \"statc\"\n",
			want: []Problem{{"routes.source", `expected "file:<path>" or an https:// URL (http:// only for a loopback host)`}},
		},
		{
			name: "wrong type", add: "[routes]\nsource = 1\nsorce = \"static\"\n",
			want: []Problem{
				{"routes.source", "expected a string, got an integer"},
				{"routes.sorce", "unknown key; expected one of: source"},
			},
		},
	})
}

// TestControlPlaneNoSecretInErrors: neither a pasted token nor URL
// credentials reach an error message.
func TestControlPlaneNoSecretInErrors(t *testing.T) {
	doc := edit(t, base, staticRoutes, "", authzSource, `source = "https://u:`+canaryDoc+`@cp.example.com/a?k=`+canaryDoc+`"`) +
		"[routes]\nsource = \"http://cp.example.com/r?sig=" + canaryDoc + "\"\n[control_plane]\ntoken = \"" + canaryDoc + "\"\n"
	_, err := Parse([]byte(doc), ruleEnv(), ruleFS())
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	assertNoCanary(t, "error", err.Error())
	if !strings.Contains(err.Error(), "routes.source") || !strings.Contains(err.Error(), "control_plane.token") {
		t.Errorf("error does not name the problems:\n%v", err)
	}
}
