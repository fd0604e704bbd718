package authsnap

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Schema numbers this package reads: MinSchema..Schema. Schema 2 added
// the budgets ([Limits.USDPerDay], [Limits.USDPerMonth],
// [Limits.BudgetMode]); a member a
// schema introduced is refused in an older document (proto/VERSIONING.md).
const (
	MinSchema = 1
	Schema    = 2
)

// Limits enforced by [Snapshot.Validate].
const (
	// MaxIDLength is the longest key_id or tenant_id, in characters.
	MaxIDLength = 128
	// DigestLength is the length of a key digest: hex-encoded SHA-256.
	DigestLength = 2 * sha256.Size
	// MaxLimit is the largest value of a member of [Limits]: 2^53 − 1,
	// the largest integer every JSON implementation reads exactly.
	MaxLimit = 1<<53 - 1
)

// Snapshot is one complete authorization snapshot.
type Snapshot struct {
	Schema      int       `json:"schema"`                // must be [Schema]
	Version     uint64    `json:"version"`               // ≥ 1, strictly increasing per publisher
	GeneratedAt time.Time `json:"generated_at,omitzero"` // informational; zero = not given
	Keys        []Key     `json:"keys"`                  // required; empty = no key is accepted

	// Tenants holds the limits of the tenants that have any. A tenant that
	// keys name but that is not listed here has no limits of its own; a
	// listed tenant that no key names is allowed (and has no effect).
	Tenants []Tenant `json:"tenants,omitzero"`
}

// Tenant describes the limits shared by every key of one tenant.
type Tenant struct {
	TenantID string `json:"tenant_id"`       // as in [Key.TenantID] (1–128 characters)
	Limits   Limits `json:"limits,omitzero"` // zero = unlimited
}

// Limits bounds what a key, or all keys of a tenant together, may do
// (docs/limits.md). A request must pass both its key's and its tenant's
// limits. Each member is either 0, meaning no limit of that kind (the
// member is omitted in JSON), or 1–[MaxLimit]; a document cannot write 0,
// so that a limit lost in transit never reads as "refuse everything".
type Limits struct {
	// RequestsPerMinute bounds the requests admitted per minute.
	RequestsPerMinute int64 `json:"requests_per_minute,omitzero"`
	// TokensPerMinute bounds the tokens (input + output, as the provider
	// reports them) used per minute.
	TokensPerMinute int64 `json:"tokens_per_minute,omitzero"`
	// MaxConcurrent bounds the requests in progress at once.
	MaxConcurrent int64 `json:"max_concurrent,omitzero"`

	// Budgets (schema 2; docs/limits.md "Budgets"): what the attempts of
	// the key, or of all keys of the tenant, may cost in one UTC calendar
	// day or month, in US dollars as an exact decimal string ("200",
	// "12.5"; at most 12 digits after the point, above 0, up to
	// [usd.MaxBudget]). "" (omitted) is no budget.
	USDPerDay   string `json:"usd_per_day,omitempty"`
	USDPerMonth string `json:"usd_per_month,omitempty"`

	// BudgetMode (schema 2; docs/limits.md "Reservations") is how the
	// budgets of these Limits are held: [BudgetCharge] ("", omitted),
	// spend charged as each attempt ends, or [BudgetReserve], each
	// request's worst-case cost held at admission and settled at its end,
	// so that the budget is never exceeded. Only beside a budget.
	BudgetMode string `json:"budget_mode,omitempty"`
}

// Budget modes ([Limits.BudgetMode]).
const (
	BudgetCharge  = "charge"
	BudgetReserve = "reserve"
)

// Reserves reports whether l's budgets are held in reservation mode.
func (l Limits) Reserves() bool { return l.BudgetMode == BudgetReserve }

// IsZero reports whether l sets no limit at all.
func (l Limits) IsZero() bool { return l == Limits{} }

// Key describes one client API key.
type Key struct {
	KeyID    string `json:"key_id"`    // stable id, safe to log (1–128 characters)
	TenantID string `json:"tenant_id"` // owner, safe to log (1–128 characters)
	Digest   string `json:"digest"`    // [Digest] of the raw key: 64 lowercase hex characters

	// Models is the allowlist of public model names. nil (omitted or null in
	// JSON) allows every model; an empty, non-nil slice allows none. An
	// entry that ends in "*" is a pattern: it allows every asked name that
	// starts with the part before the "*" and goes on for at least one
	// character ("claude-*" allows "claude-sonnet-4-5"). The
	// omitzero option keeps that distinction when encoding: omitempty would
	// drop an empty list and turn "no models" into "all models".
	Models []string `json:"models,omitzero"`

	ExpiresAt *time.Time `json:"expires_at,omitempty"` // nil = never expires
	Disabled  bool       `json:"disabled,omitempty"`   // rejected like an unknown key

	// Limits are the key's own limits; the zero value (omitted) is
	// unlimited. The tenant's limits ([Snapshot.Tenants]) apply as well.
	Limits Limits `json:"limits,omitzero"`
}

// Digest returns the digest a snapshot stores for rawKey: the SHA-256 of
// its bytes, as 64 lowercase hex characters.
func Digest(rawKey string) string {
	sum := sha256.Sum256([]byte(rawKey))
	return hex.EncodeToString(sum[:])
}
