package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scootgate/scootgate/internal/upstream"
)

// An API's rate-limit headers are read into upstream.Headroom, the form
// selection keeps per backend (docs/routing.md "Headroom"): one budget
// for requests and one for tokens (for an API with several token
// budgets, the one with the least left), and a count of the values that
// were present but could not be read.

// Tighter returns whichever of a and b leaves less: the smaller
// remaining share of its limit (the smaller remaining count when a limit
// is unknown). A budget that is not Known loses to one that is.
func Tighter(a, b upstream.Budget) upstream.Budget {
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
// *malformed. The budget is stated only when the remaining count is;
// an unknown limit is 0.
func ReadBudget(h http.Header, limit, remaining, reset string, parseReset func(string) (time.Duration, bool), malformed *int) upstream.Budget {
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
	var b upstream.Budget
	lim, limOK := count(limit)
	b.Remaining, b.Stated = count(remaining)
	if v, ok, bad := HeaderValue(h, reset); ok {
		if d, ok := parseReset(strings.TrimSpace(v)); ok {
			b.Reset = d
		} else {
			*malformed++
		}
	} else if bad {
		*malformed++
	}
	if limOK && b.Stated && b.Remaining > lim {
		// Contradicts itself: trust neither number.
		*malformed++
		return upstream.Budget{}
	}
	if !b.Stated {
		return upstream.Budget{} // a limit or a reset alone says nothing about what is left
	}
	if limOK {
		b.Limit = lim
	}
	return b
}
