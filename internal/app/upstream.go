package app

import (
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/upstream"
)

// upstreamOptions maps the [balance], [breaker] and [cooldown] sections
// onto Options (clock and rand left nil: real). balance.slow_start = 0
// (off) becomes a negative SlowStart.
func upstreamOptions(c *config.Config) upstream.Options {
	o := upstream.Options{
		DefaultTTFB: c.Balance.DefaultTTFB,
		DecayWindow: c.Balance.DecayWindow,
		SlowStart:   c.Balance.SlowStart,
		Breaker: upstream.BreakerOptions{
			Failures:    c.Breaker.Failures,
			Cooldown:    c.Breaker.Cooldown,
			MaxCooldown: c.Breaker.MaxCooldown,
		},
		RateLimitDefault: c.Cooldown.RateLimitDefault,
		RateLimitMax:     c.Cooldown.RateLimitMax,
		QuotaCooldown:    c.Cooldown.Quota,
		AuthProbeAfter:   c.Cooldown.DisabledProbe,
	}
	if o.SlowStart == 0 {
		o.SlowStart = -1
	}
	return o
}
