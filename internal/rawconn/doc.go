// Package rawconn makes the node's TCP reads and writes without entering
// the Go runtime's system-call state.
//
// Every read(2) and write(2) of package net goes through syscall.Syscall,
// which tells the scheduler that the goroutine may block in the kernel.
// The first such call after the process was asleep also wakes the
// runtime's monitor thread (sysmon), which then polls every 20 µs until
// the process sleeps again. On a node that relays streams, where every
// event is a short wakeup (read the provider, write the client), those
// polls were about a quarter of the node's CPU when it had one CPU, and
// more than half of its context switches (docs/performance.md, "Raw
// socket calls").
//
// The sockets are non-blocking: a read or write returns at once, with
// data or with EAGAIN, so telling the scheduler is not needed. Conn makes
// the same two calls as raw system calls (syscall.RawSyscall) inside
// syscall.RawConn's Read and Write, which still wait for readiness in the
// runtime's poller on EAGAIN and so keep deadlines, Close and
// cancellation exactly as package net has them. Errors are the ones
// package net returns: *net.OpError around net.ErrClosed,
// os.ErrDeadlineExceeded or the errno; io.EOF at the end of the stream.
//
// Only Linux gets the raw calls; elsewhere Wrap returns the connection
// as it is.
package rawconn
