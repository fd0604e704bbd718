package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Budget is one rate limit of a provider credential as one answer's
// headers state it: how many requests (or tokens) the window allows, how
// many remain, and how long until it is whole again. A field the headers
// did not carry is -1 (Limit, Remaining) or 0 (Reset).
type Budget struct {
	Limit     int64
	Remaining int64
	Reset     time.Duration // 0: not stated
}

// Known reports whether the headers stated how much remains.
func (b Budget) Known() bool { return b.Remaining >= 0 }

// NoBudget is a Budget the headers said nothing about.
var NoBudget = Budget{Limit: -1, Remaining: -1}

// Headroom is what an answer's rate-limit headers say about the
// backend's credential: its request budget and its token budget (for an
// API with several token budgets, the one with the least remaining).
// Malformed counts the header values that were present but could not be
// read; they are ignored.
type Headroom struct {
	Requests  Budget
	Tokens    Budget
	Malformed int
}

// NoHeadroom is a Headroom of an answer without rate-limit headers.
var NoHeadroom = Headroom{Requests: NoBudget, Tokens: NoBudget}

// Known reports whether h says anything about either budget.
func (h Headroom) Known() bool { return h.Requests.Known() || h.Tokens.Known() }

// Tighter returns whichever of a and b leaves less: the smaller
// remaining share of its limit (the smaller remaining count when a limit
// is unknown). A budget that is not Known loses to one that is.
func Tighter(a, b Budget) Budget {
	switch {
	case !a.Known():
		return b
	case !b.Known():
		return a
	}
	if a.Limit > 0 && b.Limit > 0 {
		// a.Remaining/a.Limit <= b.Remaining/b.Limit without division.
		if a.Remaining*b.Limit <= b.Remaining*a.Limit {
			return a
		}
		return b
	}
	if a.Remaining <= b.Remaining {
		return a
	}
	return b
}

// HeaderValue returns the single value of the header name in h: ok is
// false when it is absent, and bad is true when it appears more than once
// (which value counts would be a guess, so neither does).
func HeaderValue(h http.Header, name string) (v string, ok, bad bool) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", false, false
	case 1:
		return vs[0], true, false
	}
	return "", false, true
}

// ReadBudget reads one budget from the headers named limit, remaining and
// reset (canonical names), with parseReset reading the reset's form. A
// value that is repeated or unreadable is left out and counted in
// *malformed.
func ReadBudget(h http.Header, limit, remaining, reset string, parseReset func(string) (time.Duration, bool), malformed *int) Budget {
	b := NoBudget
	count := func(name string) (int64, bool) {
		v, ok, bad := HeaderValue(h, name)
		if !ok {
			if bad {
				*malformed++
			}
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			*malformed++
			return 0, false
		}
		return n, true
	}
	if n, ok := count(limit); ok {
		b.Limit = n
	}
	if n, ok := count(remaining); ok {
		b.Remaining = n
	}
	if v, ok, bad := HeaderValue(h, reset); ok {
		if d, ok := parseReset(strings.TrimSpace(v)); ok {
			b.Reset = d
		} else {
			*malformed++
		}
	} else if bad {
		*malformed++
	}
	if b.Limit >= 0 && b.Remaining > b.Limit {
		// Contradicts itself: trust neither number.
		*malformed++
		b.Limit, b.Remaining = -1, -1
	}
	return b
}
