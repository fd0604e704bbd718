package credential_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/credential"
)

// TestRefreshRuleDocumented: the numbers docs/egress.md "Minted-token
// credentials" gives are the constants the code uses.
func TestRefreshRuleDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/egress.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	words := func(d time.Duration) string {
		n, unit := int64(d/time.Second), "second"
		if d%time.Minute == 0 {
			n, unit = int64(d/time.Minute), "minute"
		}
		if n != 1 {
			unit += "s"
		}
		return fmt.Sprintf("%d %s", n, unit)
	}
	for _, c := range []struct {
		format string
		d      time.Duration
	}{
		{"From %s before the token expires", credential.RefreshWindow},
		{"for a token that lives under %s", 2 * credential.RefreshWindow},
		{"not handed out in its last %s", credential.ExpiryMargin},
		{"A token that lives under %s", credential.MinTokenLifetime},
		{"The next grant waits %s, doubling", credential.BackoffMin},
		{"up to %s.", credential.BackoffMax},
		{"Every %s the node also looks", credential.DefaultCheckEvery},
	} {
		if want := fmt.Sprintf(c.format, words(c.d)); !strings.Contains(doc, want) {
			t.Errorf("docs/egress.md does not say %q", want)
		}
	}
}
