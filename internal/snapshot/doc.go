// Package snapshot fetches the documents a control plane publishes
// (authorization snapshots now, route snapshots later; SPEC §7). It only
// moves bytes: decoding, validation, the version gate and the atomic swap
// belong to the consumer (see authz.Load).
//
// # Basics
//
// A [Source] returns a document and whether it differs from the one it
// returned last time, so that a poller does not decode and compile an
// unchanged document on every tick. [ParseSource] turns a configured
// source string into a Source:
//
//	file:/etc/scootgate/authz.json    absolute path
//	file:///etc/scootgate/authz.json  the same, in URL form
//	file:authz.json                   relative to the config file's directory
//
// Paths in file: URLs are percent-decoded (file:my%20dir/a.json names
// "my dir/a.json"). http:// and https:// sources (GET with ETag /
// If-None-Match, SPEC §7) are not implemented yet; ParseSource rejects
// them with a clear error.
//
// # Caveats
//
// A source reports "changed" relative to its previous Fetch, not to what the
// consumer accepted. A consumer that rejects a document should call Forget
// when the source implements [Forgetter], so that the next poll fetches and
// reports the same bad document again instead of calling it unchanged.
//
// Write file sources atomically (write a temporary file, then rename it over
// the old one). A reader can otherwise see a half-written document; it is
// rejected as truncated and picked up complete on a later poll.
package snapshot
