package app

import (
	"net/http"
	"slices"
)

// closeAfterChunked closes the connection after every HTTP/1.x request with
// a chunked body. It is the request-smuggling guard that net/http lacks
// (docs/api.md "Request framing").
//
// net/http rejects two differing Content-Length headers (400) and any
// Transfer-Encoding other than a single "chunked" (501), but it accepts
// Content-Length together with Transfer-Encoding: chunked: it frames the
// body by the chunks, deletes Content-Length from the header map (so a
// handler cannot tell the two cases apart), and keeps the connection open.
// Behind a load balancer that frames by Content-Length, the bytes after the
// last chunk would then be read as a second request that the balancer
// never saw. RFC 9112 §6.3 says the server MUST close the connection after
// answering such a message; closing after every chunked request does that
// without seeing the header. Clients of this API send Content-Length (the
// official SDKs do), so keep-alive is lost only by the rare chunked upload.
//
// It must wrap everything else: a handler that answers without reading the
// body (a 401, the concurrency refusal) would otherwise let net/http drain
// the chunked body and parse what follows as the next request.
func closeAfterChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && slices.Contains(r.TransferEncoding, "chunked") {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
