package authsnap_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/authsnap"
)

// TestBudgetsFixture: the schema 2 example with budgets decodes and
// validates, its budgets (and the tenant's reservation mode) as written.
func TestBudgetsFixture(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtures, "valid-budgets.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := authsnap.Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := []authsnap.Limits{
		{RequestsPerMinute: 600, USDPerDay: "50", USDPerMonth: "1000"},
		{USDPerMonth: "5000.50", BudgetMode: authsnap.BudgetReserve},
	}
	if diff := cmp.Diff([]authsnap.Limits{got.Keys[0].Limits, got.Tenants[0].Limits}, want); diff != "" {
		t.Errorf("limits (-got +want):\n%s", diff)
	}
}
