package config

import (
	"testing"
	"time"
)

func TestRulesTracing(t *testing.T) {
	view := func(c *Config) any { return c.Tracing }
	def := Defaults().Tracing
	runRules(t, []ruleCase{
		{name: "absent: off", view: view, wantView: def},
		{
			name:     "https collector",
			add:      "[tracing]\nendpoint = \"https://otel.example:4318/v1/traces\"\nsample_ratio = 0.25\ninterval = \"1s\"\n",
			view:     view,
			wantView: Tracing{Endpoint: "https://otel.example:4318/v1/traces", SampleRatio: 0.25, Interval: time.Second},
		},
		{
			name:     "plain http to a local agent, integer ratio",
			add:      "[tracing]\nendpoint = \"http://127.0.0.1:4318/v1/traces\"\nsample_ratio = 0\n",
			view:     view,
			wantView: Tracing{Endpoint: "http://127.0.0.1:4318/v1/traces", Interval: 5 * time.Second},
		},
		{
			name: "plain http elsewhere, credentials, bad ratio and interval",
			add:  "[tracing]\nendpoint = \"http://otel.example:4318/v1/traces\"\nsample_ratio = 1.5\ninterval = \"2m\"\n",
			want: []Problem{
				{"tracing.endpoint", "plain http only to a loopback collector; use https"},
				{"tracing.sample_ratio", "1.5 is out of range; expected 0..1"},
				{"tracing.interval", "2m0s is too large; expected at most 1m0s"},
			},
		},
		{
			name: "wrong types and credentials in the URL",
			add:  "[tracing]\nendpoint = \"https://u:p@otel.example/v1/traces\"\nsample_ratio = \"all\"\n",
			want: []Problem{
				{"tracing.endpoint", "must not contain credentials"},
				{"tracing.sample_ratio", "expected a number from 0 to 1, got a string"},
			},
		},
	})
}
