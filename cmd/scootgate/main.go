// Command scootgate is the ScootGate data-plane node.
//
//	scootgate run --config FILE     serve until SIGINT/SIGTERM, then drain
//	scootgate check --config FILE   validate the config and list every problem
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
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `usage: scootgate <command> [flags]

commands:
  run --config FILE     run the node
  check --config FILE   validate the config; list every problem with its key path
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
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate: %s\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the process at once
	}()
	if err := app.Run(ctx, cfg, app.Options{Logger: log, BaseDir: filepath.Dir(path)}); err != nil {
		log.Error("node failed to start", "error", err)
		return 1
	}
	return 0
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	path, ok := configFlag("check", args, stderr)
	if !ok {
		return 2
	}
	if _, err := config.Load(path); err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "%s: %d problem(s):\n", path, len(cerr.Problems))
			for _, p := range cerr.Problems {
				fmt.Fprintf(stderr, "  %s: %s\n", p.Path, p.Msg)
			}
		} else {
			fmt.Fprintf(stderr, "%s: %s\n", path, err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
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
