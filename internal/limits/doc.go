// Package limits admits or refuses a request by its key's and its
// tenant's limits from the authorization snapshot (docs/limits.md).
//
// # Basics
//
// A [Limiter] keeps, per limited key id and per limited tenant id, two
// token buckets and a concurrency count. Compiling an authorization
// snapshot binds each limited key to them ([Limiter.Bind],
// [Binder.Subject]): the principal holds its [Subject], so a request
// pays no lookup, only the check. [Subject.Admit] checks the key and its
// tenant together and either takes from both or from neither: one request
// from the requests bucket, one concurrency slot, and it requires the
// tokens bucket to be positive. The returned [Ticket] debits the tokens
// each attempt used when the attempt ends ([Ticket.Debit]: tokens are
// known only after the answer) and gives the slots back ([Ticket.Release],
// once, however the request ends).
//
// A key or tenant bound again by the next snapshot keeps its state with
// its new limits; one not bound again is forgotten, which also bounds
// memory to the snapshot's limited keys.
//
// # Why token buckets
//
// A bucket of capacity L that refills at L per minute lets a quiet key use
// its whole minute at once and then paces it, and, unlike a fixed window,
// answers exactly when the next request fits: (1 − level) / rate. That is
// what Retry-After promises. The reset the headers report is when the
// bucket is full again, (L − level) / rate, which is OpenAI's and
// Anthropic's meaning of "reset". A sliding log would be as honest but
// costs memory per request.
//
// # Shares
//
// Each node enforces local_share of every limit (docs/limits.md "Behind
// a load balancer"): with N nodes behind a balancer that spreads requests
// evenly, 1/N makes the fleet's sum the limit. A limit's share is
// floor(L × share), and at least 1.
//
// # The redis store
//
// With a [Redis] store (Options.Fleet), requests and tokens per minute
// are the fleet's: one bucket per key or tenant and kind lives in Redis,
// with the same capacity and refill as a local one, and nodes take
// leases from it (a twentieth of the limit at a time) with one Lua
// script run atomically (EVALSHA). Admit spends from the node's lease
// and pays a round trip only when the lease is empty; a lease below half
// is topped up in the background. Tokens debited beyond the lease are a
// debt, paid to the fleet's bucket with the next take. A node holds at
// most one and a half leases plus one unit unspent, so the fleet admits
// at most what the bucket gives plus that per node (docs/limits.md
// "Overshoot"). Leased budget unused after a window is dropped.
//
// max_concurrent is the fleet's too: per key or tenant, a Redis hash of
// what each node holds (node id → slots and expiry), set by one atomic
// script (holdScript) that drops expired holds and grants what fits
// under the limit. A request takes one of its node's held slots and
// pays a round trip only when all are in use; released slots stay with
// the node until its next refresh (holdRefresh, run by [Redis.Run] in
// one pipelined round trip), which sets each hold that changed to the
// node's peak since the previous one, and renews one that did not
// every holdRenew, pushing its expiry holdTTL on: a crashed node's
// slots free by themselves. A hold is set, never added to, and
// never below the requests the node has in progress, so requests
// admitted during an outage are counted once the store is back, and
// each admitted request releases its slot exactly once, whichever path
// admitted it (one in-flight count per state). Holds granted before an
// outage (an earlier generation of the store) are not used again.
//
// The script takes now from the caller: the buckets follow the nodes'
// clocks (injectable in tests), not Redis's. While the store is down
// (a take failed), Admit follows Options.OnFailure: the local share
// buckets (which every take keeps no fuller than the node's share of the
// fleet's bucket, so a fallback starts where the fleet was rather than at
// a fresh minute), no limits, or refusals with
// KindStore; [Redis.Run] probes with backoff and the node returns to the
// fleet's buckets when Redis answers, without a restart.
//
// # Budgets
//
// A key's or tenant's usd_per_day and usd_per_month (docs/limits.md
// "Budgets") are cumulative spend in UTC calendar windows, in integer
// picodollars (pkg/usd), not buckets: [Ticket.Charge] adds each attempt's
// cost when it ends, and Admit refuses (KindBudget, Retry-After the
// window's end) once the window's spend has reached the budget. The
// local store counts the node's own spend against its share; with a
// [Redis] store every window is one fleet-wide INCRBY counter; charges
// and fresh reads of the windows in use go in the store's refresh, once
// a second, batched (no round trip per request), and spend made during an
// outage is sent when the store is back (spendfleet.go).
//
// A budget in reservation mode (docs/limits.md "Reservations") holds
// each request's worst-case cost at admission ([Subject.AdmitReserve])
// and settles it when the ticket is released, so that it is never
// exceeded: on the local store against the node's share, with a [Redis]
// store from grants each node takes from the fleet's counter with one
// atomic script, a twentieth of the budget at a time, and gives back
// when unused (reserve.go).
//
// # Caveats
//
// Tokens are debited after the fact, so a key may overshoot its tokens per
// minute by what the requests admitted while its balance was positive use;
// the overshoot is paid back before the next request is admitted. State
// lives in memory: a restart forgets it (buckets start full). Levels are
// float64: past 2^53 tokens a bucket loses precision, far beyond any real
// limit.
package limits
