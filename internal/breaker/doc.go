// Package breaker is a consecutive-failure circuit breaker with exactly one
// half-open probe and a growing, jittered, capped cooldown (docs/failures.md
// "Breaker").
//
// # Basics
//
// A [Breaker] is a small state machine driven by a [clock.Clock]:
//
//	closed ──(Failures consecutive failures)──▶ open
//	open ──(cooldown over; first Allow wins)──▶ half-open
//	half-open ──Success──▶ closed   (cooldown back to its base)
//	half-open ──Failure──▶ open     (cooldown doubled, capped at MaxCooldown)
//	half-open ──Abandon──▶ open     (cooldown already over: the next Allow probes)
//
// Closed allows everything. Open allows nothing until its cooldown has
// passed; then exactly one caller of Allow wins the half-open probe, under
// any concurrency (a compare-and-swap on one word that also carries a
// generation, so a caller that read an earlier open period cannot win a
// later one). Half-open allows nothing else until the probe reports.
//
// Each open period is the current cooldown shortened by a random fraction
// of up to Jitter, so breakers that opened together do not probe together;
// it never exceeds MaxCooldown. A Success closes the breaker and resets
// both the failure count and the cooldown.
//
// The closed path of Allow and Success is one atomic load; transitions take
// a small mutex. Nothing allocates.
//
// # Caveats
//
// The breaker does not hand out per-request tokens, so it cannot tell the
// probe's outcome from that of an older request admitted while it was
// still closed. Outcomes reported while open are ignored (they predate the
// open period). While half-open the first outcome reported is taken as the
// probe's: an older request's Success closes the breaker early (it is
// still evidence the backend works), and an older request ending without a
// verdict (Abandon) frees the probe slot, so a second probe may go out.
// Callers must report exactly one of Success, Failure or Abandon for every
// request Allow admitted; a probe that never reports keeps the breaker
// half-open.
package breaker
