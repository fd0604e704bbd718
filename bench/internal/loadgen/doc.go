// Package loadgen is the measuring half of the load harness
// (cmd/scootgate-load, `make bench-load`; docs/performance.md): an
// open-loop request generator, the HTTP shots it fires, latency summaries,
// and per-process CPU and memory read from /proc. It is a benchmark tool:
// the node never imports it.
//
// # Basics
//
// [Run] fires Rate × Duration shots at a constant arrival rate, each on its
// own goroutine, whether or not earlier shots have answered (open loop: a
// slow server does not slow the schedule, so queueing shows up as latency
// instead of being hidden). Every latency is measured from the shot's
// intended send time, not from when the goroutine got to send it, which
// avoids coordinated omission; [Shot.Late] says how far behind the
// schedule the generator itself was, and [ServiceLatencies] subtracts it
// (the time from the actual send, for comparing two servers measured by
// the same generator).
//
// [NonStream] and [Stream] build the shot functions: a whole JSON answer, or
// a server-sent event stream whose time to first event and gaps between
// events are recorded (read with internal/sse); a [Format] per API
// ([ChatCompletions], [Messages], [Responses]) says which event ends a
// complete stream and which carries its usage, and a stream that lacks
// either fails. [HoldStream] opens a stream,
// waits for its first event and then holds the connection open, for the
// idle-stream memory test.
//
// [Summarize] reduces durations to nearest-rank percentiles. [CPUTime] and
// [RSS] read a process's CPU time (user + system) and resident set from
// /proc, so a harness can charge CPU per request to each process.
//
// # Caveats
//
// A Go timer cannot wake a goroutine much more often than once per
// millisecond on an otherwise idle process, so at high rates shots leave in
// small batches; each keeps its own intended time, so the schedule's rate is
// exact on average and the batching shows in Shot.Late (0 to 1 ms here). /proc CPU times
// count in clock ticks (USER_HZ, 100 per second on Linux): a reading is
// exact to 10 ms, so charge CPU over runs of seconds, or have the process
// report its own getrusage (microseconds). Linux only.
package loadgen
