package mqttpub

import "time"

// backoff returns how long to wait before the next connection attempt after
// n consecutive failures (n >= 1): "full jitter" (AWS Architecture Blog,
// "Exponential Backoff And Jitter"), a uniform draw r ∈ [0, 1) scaled to
// [0, min(hi, lo·2^(n-1))). Full jitter spreads a fleet of nodes that lost
// the same broker at the same moment instead of having them return in step.
func backoff(n int, lo, hi time.Duration, r float64) time.Duration {
	ceil := lo
	for i := 1; i < n && ceil < hi; i++ {
		ceil *= 2
	}
	ceil = min(ceil, hi)
	return time.Duration(r * float64(ceil))
}
