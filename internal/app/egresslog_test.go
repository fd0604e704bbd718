package app

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/egress"
)

// TestEgressFailuresCountedAndRateLimited: every failure is counted; the
// log has one line per proxy and stage per window, the next one carrying
// how many were left out.
func TestEgressFailuresCountedAndRateLimited(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Time{})
	counts := map[string]int{}
	f := newEgressFailures(func(p string, s egress.Stage) { counts[p+"/"+s.String()]++ }, slog.New(slog.NewJSONHandler(&buf, nil)), clk.Now)
	dial := &egress.NotSentError{Proxy: "primary", Stage: egress.StageProxyDial, Err: errors.New("connection refused")}
	for range 500 {
		f.report(dial)
	}
	f.report(&egress.NotSentError{Proxy: "primary", Stage: egress.StageProxyPolicy, Err: errors.New("ruleset")})
	clk.Advance(egressLogEvery)
	f.report(dial)

	if counts["primary/proxy_dial"] != 501 || counts["primary/proxy_policy"] != 1 {
		t.Fatalf("counts %v, want every failure counted", counts)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`"stage":"proxy_dial"`, `"stage":"proxy_policy"`, `"suppressed":499`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"proxy":"primary"`) {
			t.Errorf("line %d = %s, want %s and the proxy", i, lines[i], want)
		}
	}
}

// TestDeadPrimaryProxyShows: with a dead first proxy and a working second
// one the request succeeds, and the dead one is counted on
// scootgate_egress_errors_total and logged. Before, only the last failure
// of a dial was reported, and a dial that succeeded reported none.
func TestDeadPrimaryProxyShows(t *testing.T) {
	s := startStack(t, stackOptions{deadProxyFirst: true})
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("status %d, want 200 through the second proxy", r.status)
	}
	// Reported inside the dial, before the request could go on.
	s.logs.mustContain(t, `"msg":"egress proxy attempt failed","proxy":"dead-first","stage":"proxy_dial"`)
	resp, err := http.Get(s.health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if want := `scootgate_egress_errors_total{proxy="dead-first",stage="proxy_dial"} 1`; !strings.Contains(b.String(), want) {
		t.Fatalf("metrics lack %s:\n%s", want, grepLines(b.String(), "scootgate_egress_errors_total"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
