package snapshot

import "time"

// NextDelay exposes Poller.nextDelay to the external tests.
func NextDelay(p *Poller) time.Duration { return p.nextDelay() }
