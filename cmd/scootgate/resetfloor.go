package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/snapshot"
)

// cmdResetFloor removes a persisted snapshot and its rollback floor:
//
//	reset-floor --kind routes|authz --config FILE
//	reset-floor --kind routes|authz --state-dir DIR
//
// It is the recovery for a node whose floor was raised beyond every version
// its publisher will serve (a publisher that restarted its numbering, or
// one bad publish): such a node rejects every later document as a rollback.
// Run it with the node stopped; a running node keeps its floor in memory.
// It logs one WARN line (JSON, like the node's own log) to stderr and says
// on stdout what it removed; docs/snapshots.md describes the procedure.
func cmdResetFloor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reset-floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "", `the document kind: "routes" or "authz"`)
	cfgPath := fs.String("config", "", "the node's TOML config (its control_plane.state_dir)")
	stateDir := fs.String("state-dir", "", "the node's state directory, instead of --config")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var usageErr string
	switch {
	case fs.NArg() > 0:
		usageErr = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case *kind != "routes" && *kind != "authz":
		usageErr = `--kind must be "routes" or "authz"`
	case (*cfgPath == "") == (*stateDir == ""):
		usageErr = "give exactly one of --config or --state-dir"
	}
	if usageErr != "" {
		fmt.Fprintf(stderr, "scootgate reset-floor: %s\n", usageErr)
		return 2
	}
	dir := *stateDir
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "scootgate reset-floor: %s\n(give --state-dir to skip loading the config)\n", err)
			return 1
		}
		dir = cfg.ControlPlane.StateDir
	}
	store, err := snapshot.OpenDiskStore(dir)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate reset-floor: %s\n", err)
		return 1
	}
	floor, fetched, found, err := store.ResetFloor(*kind)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate reset-floor: %s\n", err)
		return 1
	}
	if !found {
		fmt.Fprintf(stdout, "%s: no persisted %s snapshot; there is no floor to reset\n", dir, *kind)
		return 0
	}
	slog.New(slog.NewJSONHandler(stderr, nil)).Warn("rollback floor reset by an operator: the next document of any version will be applied",
		"snapshot", *kind, "state_dir", dir, "removed_floor", floor, "removed_fetched_at", fetched.UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "%s: removed the persisted %s snapshot (version %d, fetched %s) and its rollback floor.\n"+
		"The node applies the next %s document its source serves, whatever its version, and has no last good copy to start from until then.\n",
		dir, *kind, floor, fetched.UTC().Format(time.RFC3339), *kind)
	return 0
}
