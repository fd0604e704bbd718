// Command scootgate is the ScootGate data-plane node.
//
//	scootgate run --config FILE     serve until SIGINT/SIGTERM, then drain
//	scootgate run --config FILE --pprof-listen 127.0.0.1:6060
//	                                also serve the runtime's profiles there
//	scootgate check --config FILE   validate the config and the snapshots it names
//	scootgate check --offline --config FILE
//	                                validate the config only (for pre-start hooks)
//	scootgate check --routes FILE [--previous OLD] [--config FILE]
//	scootgate check --authz FILE [--previous OLD]
//	                                validate a snapshot file; with --previous, print the diff
//	scootgate check --routes|--authz FILE --verify-key PUBLIC
//	                                also require a valid signature by that key
//	scootgate keygen [--out PREFIX] write a snapshot signing key pair
//	scootgate sign --key PRIVATE FILE
//	                                print FILE as a signed envelope
//	scootgate reset-floor --kind routes|authz --config FILE|--state-dir DIR
//	                                remove a persisted snapshot and its rollback floor
//	scootgate digest                read a key on stdin, print its SHA-256 hex
//	scootgate version               print the version
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `usage: scootgate <command> [flags]

commands:
  run --config FILE [--pprof-listen HOST:PORT [--pprof-allow-remote]]
                        run the node; with --pprof-listen, also serve the Go
                        runtime's profiles (net/http/pprof) on that address, a
                        listener of their own, loopback only unless
                        --pprof-allow-remote (docs/operations.md "Profiling")
  check --config FILE   validate the config, then fetch each snapshot source it
                        names once and validate it as the node would; list every problem
  check --offline --config FILE
                        validate the config only, fetching nothing (for pre-start
                        hooks: a node must start while its control plane is down)
  check --routes FILE [--previous OLD] [--config FILE]
  check --authz FILE [--previous OLD]
                        validate a snapshot file as the node would (with --config,
                        also the credential names a routing snapshot uses); with
                        --previous, check the version rule and print the diff
  check --routes|--authz FILE --verify-key PUBLIC
                        also require a valid signature by that key (repeatable)
  keygen [--out PREFIX] write PREFIX.key and PREFIX.pub, an ed25519 key pair
                        for signing snapshots (default scootgate-snapshot)
  sign --key PRIVATE [--kind routes|authz] FILE
                        check FILE, then print it as a signed DSSE envelope
  reset-floor --kind routes|authz --config FILE|--state-dir DIR
                        with the node stopped: remove the persisted snapshot of
                        that kind and its rollback floor, so that the node
                        applies the next version its source serves, whatever it
                        is (docs/snapshots.md)
  digest                read an API key on stdin; print its SHA-256 hex digest
  version               print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "digest":
		return cmdDigest(stdin, stdout, stderr)
	case "reset-floor":
		return cmdResetFloor(args[1:], stdout, stderr)
	case "keygen":
		return cmdKeygen(args[1:], stdout, stderr)
	case "sign":
		return cmdSign(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "scootgate", version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "scootgate: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the node's TOML config")
	pprofAddr := fs.String("pprof-listen", "", "serve the runtime's profiles (net/http/pprof) on this host:port, a listener of their own (default: off)")
	pprofRemote := fs.Bool("pprof-allow-remote", false, "let --pprof-listen be a non-loopback address (profiles are served without authentication)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "scootgate run: --config is required")
		return 2
	}
	if *pprofAddr != "" {
		if err := app.CheckPprofAddr(*pprofAddr, *pprofRemote); err != nil {
			fmt.Fprintf(stderr, "scootgate run: --pprof-listen: %v\n", err)
			return 2
		}
	}
	// Request lines are written in batches (internal/logbuf); Close writes
	// the last batch before the process exits.
	logOut := logbuf.New(stderr, logbuf.Options{})
	defer logOut.Close()
	log := slog.New(logline.NewHandler(logOut, nil))
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate: %s\n", err)
		return 1
	}
	// The first signal starts the drain. A second cuts it short: the
	// requests still running are cut, their usage events are written in
	// one bounded commit, and the process dies by that signal within
	// abortBound. A third kills at once (default action). The channel
	// holds two signals, so one that arrives before the goroutine reads
	// is not swallowed (docs/operations.md "Drain").
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	abort := make(chan struct{})
	var second atomic.Value // os.Signal: the one that cut the drain
	running := make(chan struct{})
	defer close(running)
	go func() { // owned: ends after the second signal or when cmdRun returns
		defer signal.Stop(sigs) // default action again: the next signal kills
		select {
		case <-sigs:
			cancel()
		case <-running:
			return
		}
		select {
		case sig := <-sigs:
			second.Store(sig)
			close(abort)
			// Bounded whatever the flush does: exit anyway after abortBound.
			time.AfterFunc(abortBound, func() { os.Exit(exitStatus(sig)) })
		case <-running:
		}
	}()
	err = app.Run(ctx, cfg, app.Options{
		Logger: log, BaseDir: filepath.Dir(*path), Version: version, Abort: abort,
		Pprof: *pprofAddr, PprofAllowRemote: *pprofRemote, LogDropped: logOut.Dropped,
	})
	if errors.Is(err, app.ErrAborted) {
		sig, _ := second.Load().(os.Signal)
		_ = logOut.Close() // the last lines before the process dies
		dieBy(sig)
		return exitStatus(sig)
	}
	if err != nil {
		log.Error("node failed to start", "error", err)
		return 1
	}
	return 0
}

// abortBound is the most a second signal waits for the cut and the last
// outbox commit before the process exits regardless.
const abortBound = 5 * time.Second

// dieBy ends the process by sig with its default action, as a second
// signal always did, so supervisors see the same exit status.
func dieBy(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	signal.Reset(s)
	_ = syscall.Kill(os.Getpid(), s)
	time.Sleep(time.Second) // the signal is delivered asynchronously
}

// exitStatus is the shell's status for death by sig (128 + number).
func exitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// cmdDigest prints the digest the authorization snapshot stores for a key.
// Only the first line of stdin is used, without its line ending, so that
// `echo "$KEY" | scootgate digest` and a file both work.
func cmdDigest(stdin io.Reader, stdout, stderr io.Writer) int {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "scootgate digest: read stdin: %v\n", err)
		return 1
	}
	key := strings.TrimRight(line, "\r\n")
	if key == "" {
		fmt.Fprintln(stderr, "scootgate digest: no key on stdin")
		return 1
	}
	fmt.Fprintln(stdout, authsnap.Digest(key))
	return 0
}
