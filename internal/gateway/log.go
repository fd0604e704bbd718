package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"

	"github.com/scootgate/scootgate/internal/provider"
)

// log writes the attempt's request line (docs/operations.md "Logs").
// Lines of attempts cancelled by their client before anything was sent
// are limited per key (usage.CancelRate, usage.CancelBurst): a client
// that opens and resets requests by the thousand gets a few lines a
// second, the next of which says how many were left out.
func (c *call) log(ctx context.Context, a *attempt) {
	level := slog.LevelInfo
	if a.err != nil {
		level = slog.LevelWarn
	}
	lg := c.h.o.Logger
	if !lg.Enabled(ctx, level) {
		return
	}
	var suppressed uint64
	if a.state == provider.NotSent && a.stage == stageClientCancelled {
		var ok bool
		if ok, suppressed = c.h.cancelLogs.Take(c.principal.KeyID, c.h.o.Now()); !ok {
			return
		}
	}
	backend := ""
	if a.target != nil {
		backend = a.target.Backend.ID
	}
	// A fixed array: at most 15 attributes, none allocated for the slice.
	var buf [15]slog.Attr
	attrs := append(buf[:0],
		slog.String("request_id", c.rid),
		slog.String("path", c.r.URL.Path),
		slog.String("model", c.req.Model),
		slog.Bool("stream", c.req.Stream),
		slog.String("backend", backend),
		slog.Int("attempt", a.n),
		slog.String("send_state", a.state.String()),
		slog.Int("status", a.status),
		slog.Float64("ttfb_ms", ms(a.ttfb.Microseconds())),
		slog.Float64("duration_ms", ms(c.h.o.Now().Sub(c.start).Microseconds())),
		slog.String("placement", a.placement.String()),
	)
	if c.session != 0 {
		// A short hash, so that turns of one session can be followed in
		// the log; never the key (it may carry a user id).
		attrs = append(attrs, slog.String("session", strconv.FormatUint(uint64(c.session)>>40, 16)))
	}
	if a.stage != stageNone {
		attrs = append(attrs, slog.String("stage", a.stage.String()))
	}
	if a.err != nil {
		attrs = append(attrs, slog.String("error", errorText(a.err)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	lg.LogAttrs(ctx, level, "request", attrs...)
}

// errorText is an error for the log without the request URL that Go's
// *url.Error embeds (never a URL query in logs, docs/operations.md
// "Logs"; the backend id is logged beside it). Client bodies and keys
// never reach an error.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// ms is a duration in microseconds as milliseconds with three decimals.
func ms(us int64) float64 { return float64(us) / 1000 }
