// Package balance picks a provider target for one attempt (docs/routing.md "Balancing", docs/failures.md).
//
// # Basics
//
// A picker sees a read-only pool (one public model's targets of one
// protocol, sorted by tier) and picks among the eligible targets: those
// that offer the request's capabilities, were not already tried by this
// request, and whose backend is ready (not disabled, not cooling down, not
// held back by its breaker, below its hard in-flight cap; see package
// upstream). Only the lowest tier with an eligible target is considered: a
// higher tier is used only when no lower-tier target can take the request
// before sending (tiers are failover by selection, not a retry: docs/routing.md "Tiers").
// A pick returns a [Lease]: the target with its slot already taken
// (upstream State.Acquire). The attempt ends with the lease's Done, which
// reports the outcome and gives the slot back once; the caller never
// touches the backend's state itself.
//
// [P2C] is weighted_p2c (docs/routing.md "Balancing"), after tower's balance/p2c and grpc-go's
// leastrequest. It draws two distinct eligible targets, the first with
// probability proportional to effective weight and the second from the
// weight that remains, and keeps the one with the lower cost:
//
//	cost = peak-EWMA TTFB × (in-flight + 1) ÷ (weight × slow-start ramp)
//
// On equal cost it keeps the first draw. If the winner's Acquire loses a
// race (cap reached, probe taken) it tries the other, then draws again, a
// bounded number of times. A tier with a single eligible target takes it.
//
// # How a draw is made
//
// Compile indexes each tier's static weights (routes.WeightIndex). A draw
// proposes a target with probability proportional to its static weight,
// in O(1) expected time, and keeps it only if it is eligible and the
// proposal falls within the effective part of its weight (weight × ramp);
// otherwise it proposes again. Rejection sampling keeps the distribution
// exactly proportional to effective weight among eligible targets. The
// second draw spreads its proposals over the weight without the first
// target's, so it keeps "from the weight that remains". After three
// rejections in a row for P2C, eight for weighted_random (most of the
// tier's weight unavailable) the draw
// falls back to a scan of the tier, which draws the same distribution in
// linear time, as does a pool without the index; so does the second draw
// of a pair whose first took more than two proposals. The scan checks
// each target once (states, capabilities and weights read from the
// index, the cap tested inline before the rest of the state) and lists
// the eligible ones, up to 32, with their weights; the draws that follow
// walk the list. weighted_random draws the same way, without the ramp.
// P2C takes a tier of two straight: one roll orders the pair.
//
// [WeightedRandom] is the degraded mode, weighted_random: probability
// proportional to weight alone, with the same eligibility rules.
//
// [Affinity] is prompt-cache affinity (docs/routing.md "Affinity"): a
// request with a session key ([SessionKey], namespaced by the client key)
// is placed by weighted rendezvous hashing over the capability-matching
// targets of the lowest tier with an eligible target. Each target scores
// w ÷ −ln u, u uniform in (0, 1) from routes.Mix64 of the session key xor
// the target's identity hash (backend id and provider model,
// routes.TargetHash), and the targets are tried highest score first, so
// every node that holds the same table computes the same order without
// sharing anything, and a target that joins or leaves moves only the
// sessions whose first choice it is. The walk down that order takes the
// first target that is eligible and not overloaded: one with more than
// ⌈c × (m + 1)⌉ requests in flight, where m is its weight's share of the
// in-flight requests of the tier's eligible targets (the mean, when
// weights are equal) and c the load factor (consistent hashing with
// bounded loads, Mirrokni, Thorup and Zadimoghaddam 2018). A spill
// therefore lands on the same second choice every time. The placement
// (affinity, or a spill and why) is returned for logs, usage events and
// metrics. A request without a key goes to the fallback picker unchanged.
// In-flight counts are node-local, so nodes can disagree only while a
// target is over the bound. A pick scores the tier once, and once more
// for each step of a spill: a logarithm a target, with nothing
// precomputed or remembered.
//
// [RetryAfter] computes the Retry-After of the 503 sent when nothing is
// eligible (docs/api.md "Status codes"): the earliest moment any capability-matching target
// can take traffic again.
//
// # What the weights mean under P2C
//
// Weights express intent, not exact small-sample percentages (docs/routing.md "Balancing").
// Dividing the cost by the weight is what makes weights count even when a
// pool has two targets (every draw is then the same pair). The result
// depends on load:
//
//   - Loaded: in-flight settles where (in-flight + 1) ÷ weight is level
//     across targets, so each target's share of in-flight approaches its
//     weight share, and at equal latency so does its share of traffic
//     (Little's law). The "+ 1" shifts a light target down by about
//     (1 − n·wᵢ/W) ÷ K for n targets and K requests in flight.
//   - Idle (nothing in flight at each pick) and equal latency: the heavier
//     target of each drawn pair wins, so the heaviest target takes more
//     than its weight share and the lightest may take none. Its exact share
//     is Σ over ordered draws (a, b) of P(a)·P(b | a) for the pairs it
//     wins; TestP2CIdleShares checks that formula.
//
// Latency moves traffic in both regimes: a backend ten times slower needs
// ten times fewer requests in flight to cost the same, and the estimate's
// decay toward zero (package upstream) brings a backend that was slow back
// into play once it has been left alone for a while.
//
// # Caveats
//
// Randomness is injected ([P2C].Float64, [WeightedRandom].IntN) so tests
// are deterministic; the defaults are math/rand/v2's goroutine-safe
// functions. The clock is the one of the pool's upstream Registry, read
// once per pick (by an affinity pick only when a cooldown, a disable or
// the load bound needs it). Picking does not allocate (BenchmarkPick). Its
// cost does not grow with the tier while most of the tier's weight is
// eligible and ramped; it becomes linear in the tier's size when most of
// it is not (many targets at their cap, open, cooling down, tried, or
// without the capability), through the scan. An affinity pick scores
// every capable target of the tier (weighted rendezvous hashing: each
// score bounded with a few multiplications, math.Log only where two
// bounds overlap); a spill past the first choice scores the tier again
// for each step.
//
// Costs are compared with upstream's State.Cheaper, which orders two
// targets as their Costs do up to floating-point rounding (one exponential
// instead of two): costs within about 1e-15 of each other may come out in
// either order. Exact ties (same estimate, age, ramp, load and weight)
// still keep the first draw.
package balance
