package snapshot

import (
	"log/slog"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/config"
)

// NextDelay exposes Poller.nextDelay to the external tests.
func NextDelay(p *Poller) time.Duration { return p.nextDelay() }

// PollAgain exposes Poller.pollAgain: whether Run would poll at once.
func PollAgain(p *Poller) bool { return p.pollAgain() }

// ConfigHTTPOptionsClock is ConfigHTTPOptions with the clock of the
// client-certificate reloader.
func ConfigHTTPOptionsClock(cp config.ControlPlane, log *slog.Logger, clk *clock.Fake) (HTTPOptions, error) {
	return configHTTPOptions(cp, log, clk.Now)
}

// Delay exposes Poller.delay: the pause Run would take now.
func Delay(p *Poller) time.Duration { return p.delay() }
