// Command scootgate is the ScootGate data-plane node.
//
//	scootgate run --config FILE     serve until SIGINT/SIGTERM, then drain
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
	"syscall"

	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `usage: scootgate <command> [flags]

commands:
  run --config FILE     run the node
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

func configFlag(name string, args []string, stderr io.Writer) (string, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the node's TOML config")
	if err := fs.Parse(args); err != nil {
		return "", false
	}
	if *path == "" {
		fmt.Fprintf(stderr, "scootgate %s: --config is required\n", name)
		return "", false
	}
	return *path, true
}

func cmdRun(args []string, stderr io.Writer) int {
	path, ok := configFlag("run", args, stderr)
	if !ok {
		return 2
	}
	// Request lines are written in batches (internal/logbuf); Close writes
	// the last batch before the process exits.
	logOut := logbuf.New(stderr, logbuf.Options{})
	defer logOut.Close()
	log := slog.New(slog.NewJSONHandler(logOut, app.LogOptions()))
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate: %s\n", err)
		return 1
	}
	// The first signal starts the drain; a second kills the process at once
	// (docs/operations.md). The handler is removed before the drain starts: with
	// signal.NotifyContext a second signal that came before its stop() ran
	// was swallowed, and the node drained for the full grace.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { // owned: ends at the first signal or when cmdRun returns
		select {
		case <-sigs:
			signal.Stop(sigs) // default action again: the next signal kills
			cancel()
		case <-ctx.Done():
			signal.Stop(sigs)
		}
	}()
	if err := app.Run(ctx, cfg, app.Options{Logger: log, BaseDir: filepath.Dir(path), Version: version}); err != nil {
		log.Error("node failed to start", "error", err)
		return 1
	}
	return 0
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
