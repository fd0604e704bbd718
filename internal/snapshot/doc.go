// Package snapshot keeps the documents a control plane publishes current on
// a node: the authorization snapshot and the routing snapshot (docs/snapshots.md). It moves and guards bytes; what a document means is the business
// of a [DecodeFunc] supplied by the consumer (the routes one in app, or an
// authz one).
//
// # Basics
//
// A [Source] returns a document and whether it differs from the one it
// returned last time. [ParseSource] turns a configured source string into
// one:
//
//	file:/etc/scootgate/authz.json    absolute path
//	file:///etc/scootgate/authz.json  the same, in URL form
//	file:authz.json                   relative to the config file's directory
//	https://cp.internal/v1/routes     HTTP GET (http:// only for a loopback host)
//
// A [FileSource] notices changes by inode, size, mtime and SHA-256. An
// [HTTPSource] sends the bearer token and If-None-Match: "<version>" once
// it knows the consumer's version ([Versioner]); 304 means unchanged. It
// reads a 200 body completely, within a deadline and a size limit, before
// returning any of it, so a truncated or slow response is an error, never
// half a document. It connects directly, not through the
// egress proxy: the control plane is an internal service, the egress proxy
// is the only way to providers (docs/egress.md), and a second, implicit path
// (HTTP_PROXY) would be unconfigured. Redirects are not followed.
//
// A [Poller] owns one kind of document. Restore applies the copy a
// [DiskStore] kept from the last run; Poll fetches once; Run polls every
// Interval ± Jitter until its context ends, except that after a poll the
// server held (a long poll, [LongPoller]) or that brought a new document it
// polls again at once; rejected documents always wait. While the node is
// unready (nothing loaded, or stale) it asks without a hold and retries
// failures within [MaxRetry], so it is ready again within seconds of the
// control plane answering (docs/snapshots.md "Recovery"). Each new document goes through
// the DecodeFunc (decode and validate, no side effects), then the version
// rules, then its apply func (compile and swap, whole or nothing):
//
//   - a version below the floor (the highest ever applied, persisted) is
//     rejected with [ErrRollback], and one more than [MaxVersionJump]
//     above it with [ErrVersionJump];
//   - the version already loaded is "no change" (docs/snapshots.md);
//   - anything higher is applied, persisted with its fetch time, and the
//     source is told the new version.
//
// A rejected document is counted, shown in [Status] and logged, and the
// previous one keeps serving; the source forgets it, so the next poll
// judges it again instead of calling it unchanged.
//
// # Staleness
//
// [Poller.Ready] fails with [ErrStale] when there was no successful
// contact (a 200 or 304, or a successful file read) for longer than
// StaleAfter, measured after a restart from the persisted fetch time
// (docs/snapshots.md "Staleness"), so /readyz tells the truth while traffic keeps flowing on the last
// documents. A 304 refreshes the persisted fetch time, at most every
// StaleAfter/4. A document that is fetched but rejected counts as contact:
// the control plane is reachable, and a bad publish must not take a whole
// fleet out of its load balancers at once (it shows in Rejections and
// LastError instead, which is what to alert on).
//
// # Wiring
//
//	httpOpts, err := snapshot.ConfigHTTPOptions(cfg.ControlPlane, logger)
//	store, err := snapshot.OpenDiskStore(cfg.ControlPlane.StateDir)
//	src, err := snapshot.ParseSource(cfg.Routes.Source, baseDir, httpOpts)
//	p := snapshot.NewPoller(snapshot.PollerOptions{
//		Name: "routes", Source: src,
//		Decode:     decodeRoutes, // decode, validate, and an apply func that compiles and swaps
//		Interval:   cfg.ControlPlane.PollInterval,
//		Jitter:     cfg.ControlPlane.PollInterval / 10,
//		StaleAfter: cfg.ControlPlane.StaleAfter,
//		Store:      store, Logger: logger,
//	})
//	_ = p.Restore()      // serve the last good copy if there is one (errors are in Status)
//	_ = p.Poll(ctx)      // then the current one, if the control plane answers
//	ready.Add("routes", p.Ready) // the app's /readyz checks
//	go p.Run(ctx)        // owned by the app; returns when ctx ends
//
// [Signed] wraps a DecodeFunc so that it sees the payload of a DSSE
// envelope (pkg/snapsign), verified against trusted keys when there are
// any; the fetched bytes, envelope included, are what is persisted, so a
// restart verifies the last good copy again.
//
// # Caveats
//
// A source reports "changed" relative to its previous Fetch, not to what
// the consumer accepted; consumers that do not use a Poller should call
// Forget after rejecting a document (see [Forgetter]).
//
// Write file sources atomically (write a temporary file, then rename it over
// the old one). A reader can otherwise see a half-written document; it is
// rejected as truncated and picked up complete on a later poll.
//
// The rollback floor survives restarts. A control plane that really starts
// its version numbers over must be followed by removing the nodes' state
// directories, or every node keeps rejecting it.
package snapshot
