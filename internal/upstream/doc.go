// Package upstream keeps the node-local hot state of each provider backend:
// in-flight count against the hard cap, peak-EWMA of time to first byte,
// slow-start ramp, circuit breaker, cooldown and the disabled flag
// (docs/routing.md "Balancing", docs/failures.md).
//
// # Basics
//
// State lives in a [Registry] keyed by backend [Identity], outside the
// compiled routing table, so a table swap keeps the state of a backend
// whose identity did not change and a changed backend starts fresh (docs/snapshots.md,
// like Caddy reverseproxy/hosts.go). The Registry is a value owned
// by the app; there is no package-global state. Time and randomness come
// from [Options], so tests drive everything with a fake clock.
//
// A request takes a slot with [State.Acquire] and gives it back exactly
// once, with [State.Finish] and the attempt's [Result], or with
// [State.Release] when nothing was learned about the backend (the request
// path does this through the lease a balance picker hands out). Acquire
// refuses when the backend is disabled, cooling down, held back by its
// breaker, or at its cap; the cap is a compare-and-swap, so in-flight never
// exceeds it under any concurrency (docs/failures.md: a hard cap). Neither call
// allocates, and on the common path neither takes a lock.
//
// # Outcomes
//
// What Finish does with each [Outcome]:
//
//	Success           TTFB sample into the latency estimate; breaker success
//	ProviderError     estimate held; breaker success (the transport worked)
//	RateLimited       estimate held; cooldown for RetryAfter, or RateLimitDefault, capped at RateLimitMax
//	QuotaExhausted    estimate held; cooldown for the longer of QuotaCooldown and RetryAfter (the latter capped at 24h)
//	AuthRejected      disabled; one probe after AuthProbeAfter (below)
//	TransportFailure  estimate held; breaker failure
//	EgressFault       neutral (egress faults are not the backend's, docs/egress.md)
//	Cancelled         neutral
//	NodeOverloaded    neutral (the node was saturated when its own timer ran out: [NodeLoad])
//
// Any provider answer counts as breaker success: the breaker is about
// reaching the backend, and a 5xx or 429 proves the path works. "Neutral"
// gives back a half-open probe ([Breaker]). Only a success is a
// latency sample; every other outcome that involved the backend holds the
// estimate (below), so a backend that answers 429 or 5xx fast never looks
// faster for it (docs/failures.md "Fast errors"). A cooldown
// only ever lengthens: a shorter one never ends a longer one early.
//
// # Headroom
//
// A Result carries what the answer's rate-limit headers said
// ([Headroom]); Finish applies it whatever the outcome. A budget with
// nothing left holds the backend (Ready and Acquire refuse) until the
// reset the provider named, capped at RateLimitMax like a 429's
// Retry-After, or RateLimitDefault when it named none; a hold only ever
// lengthens, like a cooldown, and [Registry.ForgetHeadroom] (a newer
// routing table) ends it. Acquire counts each request
// against the request budget, and an answer's count is reduced by the
// requests that took a slot after the answered one (Result.Sent, which
// the lease sets), so concurrent requests do not overshoot; an answer to
// an older request than the newest applied is ignored. Tokens are counted
// the same way through [State.Spend] and [State.Fits] for requests whose
// size is known. [Options.Headroom] chooses the rule (docs/routing.md
// "Headroom" has the simulation behind the default): the threshold
// default multiplies the P2C cost by 10 while less than 10% is left.
//
// # Latency estimate
//
// The estimate is peak-EWMA (tower load/peak_ewma.rs, Finagle PeakEwma) in
// the form those balancers actually run it: the estimate decays toward zero
// with time constant DecayWindow, and a sample above the decayed estimate
// replaces it at once. In closed form, the estimate at time t is the
// largest of DefaultTTFB × e^(−(t−created)/DecayWindow) and every TTFB
// sample s × e^(−(t−tₛ)/DecayWindow). (tower blends lower samples in with
// weight 1 − e^(−Δ/DecayWindow), but its reads also decay the stored value
// and restart Δ, so on a busy balancer a lower sample weighs almost nothing;
// keeping reads side-effect free and dropping the blend makes the estimate
// independent of how often P2C looks and of how many samples arrive.)
//
// So one slow answer counts at once, a slowness that went away is
// forgotten after DecayWindow × ln(slow/fast) (about 2.3 windows for a 10×
// slowness), and a backend P2C stopped choosing looks cheaper as time
// passes until it is tried again. Reads never go below 1% of DefaultTTFB,
// so after a long quiet period backends are compared by in-flight and
// weight, not by which one was idle longest.
//
// The decay stands for "no news"; an error reply is news, but not a
// latency. So it holds the estimate: the decay restarts from the stored
// value (the last sample that set it) as if that sample had just been
// taken. Without this, a backend answering every request with a fast 5xx
// would drift toward looking fast and P2C would send it everything, the
// trap docs/failures.md "Fast errors" and Linkerd describe.
//
// [State.Cost] is the P2C cost: estimate × (in-flight + 1) ÷ effective
// weight, where the effective weight is the target's weight times the
// slow-start ramp: max(0.1, age ÷ SlowStart), capped at 1. A State's age
// starts when the Registry creates it, so every backend ramps at node start
// (together, which leaves their relative weights unchanged) and a backend
// added later ramps alone. [State.Cheaper] compares two costs as P2C does
// on every pick, with one exponential (of the difference of the two
// estimates' logarithms, stored beside them) instead of two.
//
// # Disabled backends
//
// A provider 401/403 disables the backend: it takes no traffic. It comes
// back when
//
//   - a newer routing table still lists it ([Registry.Enable], called by
//     the app after each swap; the credential behind the name may have
//     been fixed), or its Identity changes (a new State), or the node
//     restarts;
//   - or its probe succeeds: once AuthProbeAfter (default 10 min) has
//     passed since the 401/403, exactly one request is admitted, under any
//     concurrency. Any provider answer but a 401/403 (a success, another
//     error, a 429, quota) re-enables the backend, then applies as usual;
//     a 401/403 disables it for another AuthProbeAfter; an attempt that
//     learned nothing (transport failure, egress fault, client gone,
//     Release) frees the probe for the next request.
//
// [State.EligibleAt] of a disabled backend is its probe time, so the 503
// of a pool with nothing else says when to come back.
//
// # Caveats
//
// Identity names the credential, not its value: a key rotated under the
// same name is picked up by the next probe or the next routing document.
//
// While the probe is out, the first outcome reported is taken as the
// probe's; a request admitted before the disable and still running (a long
// stream) can decide it, as with the breaker's probe.
//
// [Registry.Prune] forgets backends the current table no longer uses, once
// they have nothing in flight; a backend still serving requests from an
// old table is kept until a later Prune finds it idle. Re-adding it before
// then reuses its State, so the hard cap holds across swaps. A State that
// was pruned but is still referenced by an old table stays valid (Finish
// and Release work); it is garbage once nothing references it.
//
// The breaker cannot tell a probe's outcome from an older request's (see
// the caveats in breaker.go).
package upstream
