// Package outbox is the node's bounded, durable FIFO of usage events: the
// bbolt file that events are committed to before they are published to MQTT,
// and deleted from after their PUBACK (docs/usage-events.md "Outbox").
//
// # Basics
//
// [Open] opens or creates the file and starts one writer goroutine, owned by
// the [Store] and stopped by [Store.Close]. The request path calls
// [Store.Append], which copies the payload into a bounded in-memory queue and
// returns at once: it never waits for the disk, the writer or a lock held
// across I/O. The writer commits the queue in groups, one bbolt transaction
// (one fsync, ~0.5 ms on an idle disk) per group, so fsyncs stay near
// 1/CommitInterval per second however many events arrive. A commit is due
// when the oldest waiting event was appended CommitInterval ago (default
// 100 ms), or as soon as MaxBatch (default 64) events wait; it takes
// everything queued. The window counts from Append, not from when the
// writer got to the event: events that waited through a slow commit are
// committed the moment it ends.
//
// Each commit costs ~0.15–0.3 ms of CPU (BenchmarkCommitSmall: two
// fdatasync and the page writes) whatever it holds, so at moderate rates
// the window sets the cost per event. The load harness
// (docs/performance.md) measured it: 5 ms cost ~200 µs of CPU per request
// at 500 requests/s; 25 ms cost ~300 µs per stream at 100 streams/s (usage
// events on vs off); 100 ms brought that to ~100 µs. Each commit is
// followed by a burst of MQTT delivery work (a publish and a PUBACK per
// event); on a node with one CPU 200 events per burst doubled the p99
// latency the node adds, 64 kept it at 1.4× the baseline, hence MaxBatch.
// A publisher that batches events into messages makes a shorter burst of
// the same events, and the node raises MaxBatch with it
// (mqttpub.CommitBatch).
// usage.commit_interval (1 ms..1 s) trades the other way where that
// matters.
//
// # The crash bound
//
// An accepted event is unsynced until its commit's fsync has returned; a
// kill -9 or a power loss loses exactly the unsynced events (a graceful
// shutdown flushes them). Two bounds keep that set small also when the
// writer falls behind (a contended CPU, an fsync stuck behind other
// writes on the disk):
//
//   - by count: at most MaxUnsynced events (default 4096) are unsynced at
//     any moment; events of attempts that definitely reached no provider
//     ([Store.AppendNotSent]) may hold 1/8 of them, the rest are kept
//     for the others (Dropped.NotSent past that share);
//   - by age: once the oldest unsynced event was accepted MaxUnsyncedAge
//     ago (default 2 s), new events are refused until its commit has
//     ended.
//
// Past either bound Append drops the new event and counts it
// (Dropped.Queue): when the disk cannot keep up, the node drops and counts
// rather than let the backlog a crash would lose grow, and logs why at
// most once per 10 s. So a crash loses at most 4096 events, all accepted
// within 2 s of each other; on a healthy disk, the events of the last
// commit window. The defaults hold commits of up to ~1 s at 1,600
// events/s (BenchmarkSlowCommit). [Stats].Unsynced and UnsyncedAge are
// the window's fill now. A crash also loses the events of attempts still in flight
// (they are recorded when the attempt ends), and of responses finished so
// recently that their event had not reached Append yet.
//
// Each event has a sequence number, handed out in append order from the
// bucket's sequence. A commit writes its events as one row (a group; a few
// for a commit over 256 KiB), keyed by its first event's sequence number as
// an 8-byte big-endian integer, so cursor order is append order; the value
// is the events' frames back to back (sequence number, unix-nano append
// time, payload length, payload; group.go). One row per commit rather than
// one per event is what keeps bbolt's share of a commit small: a row
// inserted and later deleted costs bbolt ~4 µs of CPU (B+tree work and a
// page write per leaf touched), so one per event cost that per event, a
// group costs it once.
// [Store.Read] returns committed events after a sequence number, FIFO;
// [Store.Notify] signals each commit that added events. The publisher
// sends events, and after each PUBACK calls [Store.Delete]; the deleted
// events vanish from Read at once and from disk with the next group
// commit, which deletes a group whose events are all delivered and
// rewrites one that keeps some, so the file holds exactly the undelivered
// events. A delete lost in a crash only means that event is delivered
// again with its same event_id: delivery is at least once
// (microservices.io transactional outbox; consumers de-duplicate,
// docs/usage-events.md). A file written with one row per event (before
// groups) is converted at Open, in one transaction, keeping every event's
// sequence number and append time.
//
// # Bounds and drops
//
// The outbox holds at most MaxEvents rows and MaxBytes payload bytes. The
// bounds count rows on disk plus events still queued, so Append decides at
// once and an accepted event always fits. An event that does not fit is
// dropped (drop_newest, docs/usage-events.md): rows already stored are never evicted. Every
// drop is counted in [Stats].Dropped by reason:
//
//   - Full: the outbox is at a bound (the broker has been away a while);
//   - Queue: the writer is behind, at MaxUnsynced or MaxUnsyncedAge (the
//     disk is slower than the event rate; see the crash bound above);
//   - NotSent: an AppendNotSent event beyond its share of MaxUnsynced;
//   - Failing: a commit failed (disk full, file unwritable, bbolt panicked);
//     the events of that commit are dropped, and for the next second Append
//     drops new events too, then lets them through to try the disk again;
//   - Closed: Append after Close.
//
// Append returning true means "committed soon, or counted as Failing";
// nothing accepted is lost without a count. [Store.Close] writes everything
// still queued, and pending deletes, before it closes the file (docs/operations.md).
//
// The bounds' current values are kept in memory and rebuilt by a scan of the
// rows at every Open (milliseconds for 100k rows), rather than kept in a
// second bucket that could disagree with the rows.
//
// # Startup
//
// Open waits at most LockTimeout for bbolt's exclusive file lock and then
// fails with [ErrLocked], naming the path (two nodes sharing one file is a
// configuration error). A path that cannot be opened (missing or read-only
// directory, permission denied, read-only file system) fails with the
// *fs.PathError. In both cases the app runs on with usage events disabled
// and reports why: the API keeps serving (docs/usage-events.md).
//
// A file that opens but is not a consistent outbox (bad meta pages, bbolt's
// tx.Check finds problems, a malformed row or frame, sequence numbers out
// of order or beyond the bucket sequence, or bbolt panics while reading
// it) is moved aside to
// <path>.corrupt-<UTC time, 20060102T150405Z>, a fresh file is created, and
// [Store.Quarantined] (and Stats) names the moved file so the app can alert
// on it. The node never crash-loops on a bad file (docs/usage-events.md "Outbox bounds").
//
// # Caveats
//
// A bbolt file never shrinks: freed pages are reused, but the file stays at
// its high-water mark (roughly MaxBytes plus page overhead after a long
// broker outage). To reclaim the space, stop the node and delete the file
// when Depth is 0, or run `bbolt compact` on it.
//
// Durability is bbolt's: a commit that returned was fsynced. Reports exist of
// bbolt files corrupted by power loss even with fsync, and of ext4
// fast_commit bugs on some Linux 5.10/5.15 kernels (bbolt and ext4 bug
// reports); the quarantine above is the answer to those. If bbolt panics
// inside Open, its file handle cannot be closed; the file is renamed before a
// fresh one is created, so the leaked lock does not block the new file.
//
// The writer's windows and the age bound are measured on the real clock
// (tests inject a fake); Options.Clock stamps the append times stored in
// rows and times the Failing backoff.
package outbox
