package config

import (
	"testing"
	"time"
)

func TestRulesBalanceBreakerCooldown(t *testing.T) {
	type sections struct {
		Balance  Balance
		Breaker  Breaker
		Cooldown Cooldown
	}
	view := func(c *Config) any { return sections{c.Balance, c.Breaker, c.Cooldown} }
	runRules(t, []ruleCase{
		{
			name: "every key set",
			add: "[balance]\nalgorithm = \"weighted_random\"\nslow_start = \"0s\"\ndefault_ttfb = \"250ms\"\ndecay_window = \"1m\"\naffinity_load_factor = 2\n" +
				"[breaker]\nfailures = 3\ncooldown = \"2s\"\nmax_cooldown = \"2s\"\n" +
				"[cooldown]\nrate_limit_default = \"1s\"\nrate_limit_max = \"1s\"\nquota = \"2h\"\ndisabled_probe = \"1s\"\n",
			view: view,
			wantView: sections{
				Balance:  Balance{Algorithm: AlgorithmWeightedRandom, SlowStart: 0, DefaultTTFB: 250 * time.Millisecond, DecayWindow: time.Minute, AffinityLoadFactor: 2},
				Breaker:  Breaker{Failures: 3, Cooldown: 2 * time.Second, MaxCooldown: 2 * time.Second},
				Cooldown: Cooldown{RateLimitDefault: time.Second, RateLimitMax: time.Second, Quota: 2 * time.Hour, DisabledProbe: time.Second},
			},
		},
		{
			name: "defaults when absent",
			view: view,
			wantView: sections{
				Balance:  Balance{Algorithm: AlgorithmWeightedP2C, SlowStart: 30 * time.Second, DefaultTTFB: time.Second, DecayWindow: 10 * time.Second, AffinityLoadFactor: 1.25},
				Breaker:  Breaker{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute},
				Cooldown: Cooldown{RateLimitDefault: 5 * time.Second, RateLimitMax: time.Minute, Quota: 30 * time.Minute, DisabledProbe: 10 * time.Minute},
			},
		},
		{
			name: "out of range",
			add: "[balance]\nslow_start = \"2h\"\ndefault_ttfb = \"0s\"\ndecay_window = \"10ms\"\naffinity_load_factor = 0.9\n" +
				"[breaker]\nfailures = 0\ncooldown = \"2h\"\nmax_cooldown = \"25h\"\n" +
				"[cooldown]\nrate_limit_default = \"-1s\"\nrate_limit_max = \"90m\"\nquota = \"500ms\"\ndisabled_probe = \"169h\"\n",
			want: []Problem{
				{"balance.slow_start", "2h0m0s is too large; expected at most 1h0m0s"},
				{"balance.default_ttfb", "0s is too small; expected at least 1ms"},
				{"balance.decay_window", "10ms is too small; expected at least 100ms"},
				{"balance.affinity_load_factor", "0.9 is out of range; expected 1..10"},
				{"breaker.failures", "0 is out of range; expected 1..1000"},
				{"breaker.cooldown", "2h0m0s is too large; expected at most 1h0m0s"},
				{"breaker.max_cooldown", "25h0m0s is too large; expected at most 24h0m0s"},
				{"cooldown.rate_limit_default", "-1s is too small; expected at least 100ms"},
				{"cooldown.rate_limit_max", "1h30m0s is too large; expected at most 1h0m0s"},
				{"cooldown.quota", "500ms is too small; expected at least 1s"},
				{"cooldown.disabled_probe", "169h0m0s is too large; expected at most 168h0m0s"},
			},
		},
		{
			name: "caps below their bases",
			add:  "[breaker]\ncooldown = \"10s\"\nmax_cooldown = \"5s\"\n[cooldown]\nrate_limit_default = \"30s\"\nrate_limit_max = \"10s\"\n",
			want: []Problem{
				{"breaker.max_cooldown", "5s must be at least breaker.cooldown (10s)"},
				{"cooldown.rate_limit_max", "10s must be at least cooldown.rate_limit_default (30s)"},
			},
		},
		{
			name: "a cap below the default base",
			add:  "[breaker]\nmax_cooldown = \"1s\"\n",
			want: []Problem{{"breaker.max_cooldown", "1s must be at least breaker.cooldown (5s)"}},
		},
		{
			name: "wrong types and unknown keys",
			add:  "[balance]\nslow_start = 30\naffinity_load_factor = \"1.5\"\n[breaker]\nfailures = \"5\"\nhalf_open = 1\n[cooldown]\nquota = true\n",
			want: []Problem{
				{"balance.slow_start", "expected a string, got an integer"},
				{"balance.affinity_load_factor", "expected a number like 1.25, got a string"},
				{"breaker.failures", "expected an integer, got a string"},
				{"breaker.half_open", "unknown key; expected one of: cooldown, failures, max_cooldown"},
				{"cooldown.quota", "expected a string, got a boolean"},
			},
		},
	})
}
