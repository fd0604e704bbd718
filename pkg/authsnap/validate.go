package authsnap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/internal/contract"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Problem is one reason a document is invalid: a member path and what is
// wrong there.
type Problem = contract.Problem

// ValidationError lists every problem [Snapshot.Validate] found.
type ValidationError struct {
	Problems []Problem // in document order; never empty
}

func (e *ValidationError) Error() string {
	return contract.ProblemsText("authsnap: invalid snapshot: ", e.Problems)
}

// Validate checks the snapshot's meaning and returns a [*ValidationError]
// listing every problem, or nil. It checks that:
//
//   - schema is [MinSchema]..[Schema] and version is at least 1;
//   - keys is present (nil is rejected: an empty list must be explicit,
//     so that a lost member cannot revoke every key by accident);
//   - key_id and tenant_id are 1–[MaxIDLength] characters without control
//     characters (both end up in logs and usage events);
//   - digest is [DigestLength] lowercase hex characters;
//   - no two keys share a key_id or a digest (a digest must name exactly one
//     principal);
//   - model names in an allowlist are non-empty, with a "*" only as the
//     last character: such an entry is a pattern that allows every name
//     that starts with the part before it and goes on for at least one
//     character (docs/authorization.md).
//   - every limit, on a key or a tenant, is 0 (none) or 1–[MaxLimit];
//   - every budget (usd_per_day, usd_per_month) is absent or a decimal
//     string above 0 and up to [usd.MaxBudget] with at most 12 digits
//     after the point, and appears only in a schema 2 document;
//   - budget_mode is absent, "charge" or "reserve", only beside a
//     budget, and only in a schema 2 document;
//   - tenants lists each tenant_id at most once (a tenant with two sets of
//     limits would be ambiguous). A tenant that keys name but tenants does
//     not list has no limits of its own; a listed tenant no key names is
//     allowed, so that a control plane may publish it before its keys.
func (s *Snapshot) Validate() error {
	if s == nil {
		return &ValidationError{Problems: []Problem{{Msg: "snapshot is nil"}}}
	}
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}

	schema := s.Schema
	if s.Schema < MinSchema || s.Schema > Schema {
		add("schema", "must be %d..%d, got %d", MinSchema, Schema, s.Schema)
		schema = Schema // judge the members by the newest rules only
	}
	if s.Version < 1 {
		add("version", "must be at least 1")
	}
	if s.Keys == nil {
		add("keys", "required (an empty array means no key is accepted)")
	}

	keyIDs := make(map[string]int, len(s.Keys))
	digests := make(map[string]int, len(s.Keys))
	for i, k := range s.Keys {
		path := "keys[" + strconv.Itoa(i) + "]"
		if msg := checkID(k.KeyID); msg != "" {
			add(path+".key_id", "%s", msg)
		} else if j, dup := keyIDs[k.KeyID]; dup {
			add(path+".key_id", "duplicate of keys[%d]", j)
		} else {
			keyIDs[k.KeyID] = i
		}
		if msg := checkID(k.TenantID); msg != "" {
			add(path+".tenant_id", "%s", msg)
		}
		if msg := checkDigest(k.Digest); msg != "" {
			add(path+".digest", "%s", msg)
		} else if j, dup := digests[k.Digest]; dup {
			// Name the other key by index only: the digest itself stays out
			// of error text.
			add(path+".digest", "duplicate of keys[%d]", j)
		} else {
			digests[k.Digest] = i
		}
		for m, name := range k.Models {
			switch i := strings.Index(name, "*"); {
			case name == "":
				add(path+".models["+strconv.Itoa(m)+"]", "must be non-empty")
			case i >= 0 && i != len(name)-1:
				add(path+".models["+strconv.Itoa(m)+"]", `"*" may appear only once, as the last character (a pattern: a literal prefix followed by "*")`)
			}
		}
		checkLimits(path+".limits", k.Limits, schema, add)
	}

	tenants := make(map[string]int, len(s.Tenants))
	for i, t := range s.Tenants {
		path := "tenants[" + strconv.Itoa(i) + "]"
		if msg := checkID(t.TenantID); msg != "" {
			add(path+".tenant_id", "%s", msg)
		} else if j, dup := tenants[t.TenantID]; dup {
			add(path+".tenant_id", "duplicate of tenants[%d]", j)
		} else {
			tenants[t.TenantID] = i
		}
		checkLimits(path+".limits", t.Limits, schema, add)
	}

	if len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

// checkLimits reports each limit outside 0 (none) and 1–MaxLimit, and
// each budget that is not a decimal above 0 and up to usd.MaxBudget, or
// that a schema 1 document carries.
func checkLimits(path string, l Limits, schema int, add func(path, format string, args ...any)) {
	for _, b := range []struct{ name, v string }{{"usd_per_day", l.USDPerDay}, {"usd_per_month", l.USDPerMonth}} {
		if b.v == "" {
			continue
		}
		if schema < 2 {
			add(path+"."+b.name, "needs schema 2 or later (this document is schema %d); raise schema or remove the member", schema)
		}
		v, err := usd.ParseBudget(b.v)
		switch {
		case err != nil:
			add(path+"."+b.name, "%s: want a budget in US dollars, a decimal string such as \"200\" or \"12.5\" with at most 12 digits after the point, up to %d", budgetMsg(b.v, err), usd.MaxBudget)
		case v == 0:
			add(path+"."+b.name, "must be above 0 (leave it out for no budget)")
		}
	}
	if l.BudgetMode != "" {
		switch {
		case schema < 2:
			add(path+".budget_mode", "needs schema 2 or later (this document is schema %d); raise schema or remove the member", schema)
		case l.BudgetMode != BudgetCharge && l.BudgetMode != BudgetReserve:
			add(path+".budget_mode", "%q is not a budget mode: want \"charge\" or \"reserve\"", l.BudgetMode)
		case l.USDPerDay == "" && l.USDPerMonth == "":
			add(path+".budget_mode", "holds no budget: set usd_per_day or usd_per_month beside it, or remove the member")
		}
	}
	for _, m := range []struct {
		name string
		v    int64
	}{
		{"requests_per_minute", l.RequestsPerMinute},
		{"tokens_per_minute", l.TokensPerMinute},
		{"max_concurrent", l.MaxConcurrent},
	} {
		switch {
		case m.v < 0:
			add(path+"."+m.name, "must be at least 1 (0 means no limit)")
		case m.v > MaxLimit:
			add(path+"."+m.name, "must be at most %d", int64(MaxLimit))
		}
	}
}

// checkID returns what is wrong with a key_id or tenant_id, or "".
func checkID(id string) string {
	switch {
	case id == "":
		return "required"
	case utf8.RuneCountInString(id) > MaxIDLength:
		return fmt.Sprintf("longer than %d characters", MaxIDLength)
	case strings.ContainsFunc(id, isControl):
		return "must not contain control characters"
	}
	return ""
}

// isControl reports C0 controls and DEL: the characters that can forge
// lines in logs. The JSON Schema's pattern rejects the same set.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// checkDigest returns what is wrong with a digest, or "".
func checkDigest(d string) string {
	const msg = "must be 64 lowercase hex characters (sha256)"
	if len(d) != DigestLength {
		return msg
	}
	upper := false
	for i := range len(d) {
		switch c := d[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			upper = true
		default:
			return msg
		}
	}
	if upper {
		return msg + ", found uppercase"
	}
	return ""
}

// budgetMsg quotes a malformed budget (clipped) and says what is wrong.
func budgetMsg(v string, err error) string {
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	switch {
	case errors.Is(err, usd.ErrPrecision):
		return strconv.Quote(v) + " has too many digits after the point"
	case errors.Is(err, usd.ErrRange):
		return strconv.Quote(v) + " is too large"
	}
	return strconv.Quote(v) + " is not a non-negative decimal"
}
