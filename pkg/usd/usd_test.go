package usd_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/pkg/usd"
)

func TestParsePerMillion(t *testing.T) {
	tests := []struct {
		in      string
		want    usd.Amount
		wantErr error
	}{
		{"3", 3_000_000, nil},
		{"3.75", 3_750_000, nil},
		{"0.0375", 37_500, nil},
		{"0.000001", 1, nil},
		{"0", 0, nil},
		{"15.000000", 15_000_000, nil},
		{"15.0000000", 0, usd.ErrPrecision}, // as the JSON Schema's pattern says
		{"100000", 100_000_000_000, nil},
		{"100000.000001", 0, usd.ErrRange},
		{"1000000", 0, usd.ErrRange},
		{"99999999999999999999999", 0, usd.ErrRange},
		{"0.0000001", 0, usd.ErrPrecision},
		{"", 0, usd.ErrSyntax},
		{".5", 0, usd.ErrSyntax},
		{"5.", 0, usd.ErrSyntax},
		{"-1", 0, usd.ErrSyntax},
		{"+1", 0, usd.ErrSyntax},
		{"1e3", 0, usd.ErrSyntax},
		{"03", 0, usd.ErrSyntax},
		{" 3", 0, usd.ErrSyntax},
		{"3,5", 0, usd.ErrSyntax},
		{"1.2.3", 0, usd.ErrSyntax},
	}
	for _, tt := range tests {
		got, err := usd.ParsePerMillion(tt.in)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("ParsePerMillion(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("ParsePerMillion(%q) = %d, want %d", tt.in, got, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "want") {
			t.Errorf("ParsePerMillion(%q) error %q does not say what was expected", tt.in, err)
		}
	}
}

func TestParseBudgetAndAmount(t *testing.T) {
	if got, err := usd.ParseBudget("200"); err != nil || got != 200*usd.Dollar {
		t.Errorf("ParseBudget(200) = %d, %v", got, err)
	}
	if got, err := usd.ParseBudget("0.000000000001"); err != nil || got != 1 {
		t.Errorf("ParseBudget(1 pico) = %d, %v", got, err)
	}
	if _, err := usd.ParseBudget("1000000.01"); !errors.Is(err, usd.ErrRange) {
		t.Errorf("ParseBudget over MaxBudget: %v", err)
	}
	if _, err := usd.ParseBudget("0.0000000000001"); !errors.Is(err, usd.ErrPrecision) {
		t.Errorf("ParseBudget 13 digits: %v", err)
	}
	if got, err := usd.ParseAmount("9223372"); err != nil || got != 9223372*usd.Dollar {
		t.Errorf("ParseAmount(max whole) = %d, %v", got, err)
	}
	if _, err := usd.ParseAmount("9223372.5"); !errors.Is(err, usd.ErrRange) {
		t.Errorf("ParseAmount past Max: %v", err)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   usd.Amount
		want string
	}{
		{0, "0"},
		{1, "0.000000000001"},
		{usd.Dollar, "1"},
		{3_750_000_000_000, "3.75"},
		{-1500 * usd.Dollar / 1000, "-1.5"},
		{usd.Max, "9223372.036854775807"},
		{math.MinInt64, "-9223372.036854775808"},
		{1_000_000_000_001, "1.000000000001"},
		{100_000_000_000, "0.1"},
		{-1, "-0.000000000001"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Amount(%d).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := usd.Amount(3_750_000).PerMillion(); got != "3.75" {
		t.Errorf("PerMillion = %q, want 3.75", got)
	}
}

// TestStringAllocs: String allocates only its result.
func TestStringAllocs(t *testing.T) {
	a := usd.Amount(123_456_789)
	if n := testing.AllocsPerRun(100, func() { _ = a.String() }); n > 1 {
		t.Errorf("String: %v allocations, want 1", n)
	}
}

func TestMulAdd(t *testing.T) {
	if got := usd.Mul(1000, 3_000_000); got != 3_000_000_000 {
		t.Errorf("Mul = %d", got)
	}
	if got := usd.Mul(1<<62, 1<<10); got != usd.Max {
		t.Errorf("Mul overflow = %d, want Max", got)
	}
	if got := usd.Mul(-5, 10); got != 0 {
		t.Errorf("Mul negative = %d", got)
	}
	if got := usd.Add(usd.Max, 1); got != usd.Max {
		t.Errorf("Add overflow = %d", got)
	}
}

// FuzzParse: whatever the parsers accept writes back to the same value
// (String and PerMillion are exact), and they never panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"3", "3.75", "0.0375", "0.000001", "100000", "1e3", "-1", ".5", "03", "9223372", "0.000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, err := usd.ParsePerMillion(s); err == nil {
			if a < 0 || a > usd.MaxPerMillion*1_000_000 {
				t.Fatalf("ParsePerMillion(%q) = %d out of range", s, a)
			}
			back, err := usd.ParsePerMillion(a.PerMillion())
			if err != nil || back != a {
				t.Fatalf("ParsePerMillion(%q) = %d; %q reads back %d, %v", s, a, a.PerMillion(), back, err)
			}
		}
		if a, err := usd.ParseAmount(s); err == nil {
			back, err := usd.ParseAmount(a.String())
			if err != nil || back != a {
				t.Fatalf("ParseAmount(%q) = %d; %q reads back %d, %v", s, a, a.String(), back, err)
			}
		}
	})
}
