// Package usd reads, writes and adds up the exact US-dollar amounts of
// ScootGate's wire contracts: token prices in routing snapshots, budgets
// in authorization snapshots and costs in usage events (docs/limits.md
// "Budgets", docs/usage-events.md "Cost").
//
// # Basics
//
// An [Amount] is an integer number of picodollars (10⁻¹² USD). On the
// wire every amount is a decimal string ("3.75", "0.0375", "200"), never
// a JSON number: a binary float cannot hold 0.1 exactly, and costs are
// sums of many small products. A price is USD per million tokens with at
// most 6 digits after the point, which makes it a whole number of
// picodollars per token ([ParsePerMillion]); a budget or a cost is USD
// with at most 12 ([ParseAmount]). Products and sums are checked: they
// saturate at [Max] instead of wrapping.
//
// # Caveats
//
// The largest amount is [Max], about 9.2 million USD. Budgets are held to
// [MaxBudget] so that a window's spend, overshoot included, stays far
// below it.
package usd

import (
	"errors"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Amount is an amount of US dollars in picodollars (10⁻¹² USD), or a price
// in picodollars per token.
type Amount int64

// Units and limits.
const (
	// Dollar is one US dollar.
	Dollar Amount = 1_000_000_000_000
	// Max is the largest amount; checked arithmetic saturates there.
	Max Amount = math.MaxInt64
	// MaxPerMillion is the largest price, in USD per million tokens
	// (1e11 picodollars a token): far above any model's, and low enough
	// that a billion tokens at that price still fit in an Amount.
	MaxPerMillion = 100_000
	// MaxBudget is the largest budget, in USD.
	MaxBudget = 1_000_000
)

// Digits after the point the two decimal forms allow.
const (
	amountDigits = 12 // picodollars
	priceDigits  = 6  // USD per million tokens → picodollars per token
)

// Errors of the parsers. Each is wrapped in a message that quotes what was
// wrong; test with errors.Is.
var (
	// ErrSyntax: not a non-negative decimal ("3", "3.75"; no sign,
	// exponent, spaces or leading zeros, a digit on each side of the
	// point).
	ErrSyntax = errors.New("want a non-negative decimal number such as \"3.75\"")
	// ErrPrecision: more digits after the point than the form allows.
	ErrPrecision = errors.New("too many digits after the point")
	// ErrRange: larger than the form allows.
	ErrRange = errors.New("too large")
)

// ParsePerMillion reads a price in USD per million tokens, with at most 6
// digits after the point, up to [MaxPerMillion], and returns it per token:
// "3.75" is 3_750_000 picodollars a token.
func ParsePerMillion(s string) (Amount, error) {
	return parse(s, priceDigits, MaxPerMillion)
}

// ParseAmount reads an amount in USD, with at most 12 digits after the
// point, up to [Max]: a cost.
func ParseAmount(s string) (Amount, error) {
	return parse(s, amountDigits, int64(Max/Dollar))
}

// ParseBudget reads a budget: an amount in USD, with at most 12 digits
// after the point, up to [MaxBudget].
func ParseBudget(s string) (Amount, error) {
	return parse(s, amountDigits, MaxBudget)
}

// parse reads the decimal s with at most digits digits after the point
// and no more than maxWhole in its whole part, as an integer scaled by
// 10^digits, then scales it to picodollars (a per-million price with 6
// digits is already picodollars per token: 10⁻⁶ USD / 10⁶ tokens).
func parse(s string, digits int, maxWhole int64) (Amount, error) {
	whole, frac, hasPoint := strings.Cut(s, ".")
	if !decimalDigits(whole) || hasPoint && !decimalDigits(frac) || len(whole) > 1 && whole[0] == '0' {
		return 0, errorf(s, ErrSyntax)
	}
	if len(frac) > digits {
		return 0, errorf(s, precisionError(digits))
	}
	if len(whole) > 19 {
		return 0, errorf(s, rangeError(maxWhole))
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > maxWhole {
		return 0, errorf(s, rangeError(maxWhole))
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64) // at most 12 digits
		f *= pow10(digits - len(frac))
	}
	// w ≤ maxWhole ≤ Max/10^digits: w×10^digits fits; the fraction may
	// still carry the sum past Max.
	v := w * pow10(digits)
	if v > math.MaxInt64-f || w == maxWhole && f > 0 {
		return 0, errorf(s, rangeError(maxWhole))
	}
	// A per-million price with 6 digits is already picodollars a token
	// (10⁻⁶ USD / 10⁶ tokens = 10⁻¹² USD), and an amount with 12 is
	// picodollars.
	return Amount(v + f), nil
}

func decimalDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func pow10(n int) int64 {
	v := int64(1)
	for range n {
		v *= 10
	}
	return v
}

// parseError says which decimal was wrong and how.
type parseError struct {
	s   string
	err error
}

func (e *parseError) Error() string {
	s := e.s
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s) + ": " + e.err.Error()
}

func (e *parseError) Unwrap() error { return e.err }

func errorf(s string, err error) error { return &parseError{s: s, err: err} }

type detailError struct {
	msg  string
	base error
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return e.base }

func precisionError(digits int) error {
	return &detailError{"want at most " + strconv.Itoa(digits) + " digits after the point", ErrPrecision}
}

func rangeError(maxWhole int64) error {
	return &detailError{"want at most " + strconv.FormatInt(maxWhole, 10), ErrRange}
}

// String writes a in USD as the shortest exact decimal: "0", "3.75",
// "0.000000000001". A negative amount gets a leading "-". It allocates
// only the string: every priced usage event carries one.
func (a Amount) String() string {
	var buf [24]byte // "-9223372.036854775808"
	b := buf[:0]
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u
	}
	whole, frac := u/uint64(Dollar), u%uint64(Dollar)
	b = strconv.AppendUint(b, whole, 10)
	if frac == 0 {
		return string(b)
	}
	var digits [amountDigits]byte
	for i := amountDigits - 1; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := amountDigits
	for digits[n-1] == '0' { // frac > 0: some digit is not 0
		n--
	}
	b = append(b, '.')
	b = append(b, digits[:n]...)
	return string(b)
}

// PerMillion writes a price a (picodollars a token) in USD per million
// tokens, the form [ParsePerMillion] reads: the same digits as
// [Amount.String], the point moved six places.
func (a Amount) PerMillion() string {
	return (a * 1_000_000).String() // a ≤ MaxPerMillion×10⁶ pico: no overflow
}

// Mul returns tokens × price, saturating at [Max]; a negative factor
// counts as 0.
func Mul(tokens int64, price Amount) Amount {
	if tokens <= 0 || price <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(price))
	if hi != 0 || lo > uint64(Max) {
		return Max
	}
	return Amount(lo)
}

// Add returns a + b, saturating at [Max] (and at the smallest Amount).
func Add(a, b Amount) Amount {
	s := a + b
	switch {
	case b > 0 && s < a:
		return Max
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
