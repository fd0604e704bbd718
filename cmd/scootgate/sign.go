package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// cmdKeygen writes a new ed25519 signing key pair for snapshots:
// PREFIX.key (PKCS#8 PEM, mode 0600) and PREFIX.pub (PKIX PEM, the form
// of `openssl pkey -pubout`, for the nodes' verify_keys). It never
// overwrites a file.
func cmdKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prefix := fs.String("out", "scootgate-snapshot", "write PREFIX.key (private) and PREFIX.pub (public)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scootgate keygen: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate keygen: %v\n", err)
		return 1
	}
	keyFile, pubFile := *prefix+".key", *prefix+".pub"
	if err := writeNew(keyFile, snapsign.MarshalPrivateKey(priv), 0o600); err != nil {
		fmt.Fprintf(stderr, "scootgate keygen: %v\n", err)
		return 1
	}
	if err := writeNew(pubFile, snapsign.MarshalPublicKey(pub), 0o644); err != nil {
		os.Remove(keyFile) // a private key without its public half is useless
		fmt.Fprintf(stderr, "scootgate keygen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "private key: %s (keep it with the control plane's release process only)\npublic key:  %s (for the nodes' verify_keys)\nkeyid:       %s\n",
		keyFile, pubFile, snapsign.KeyID(pub))
	return 0
}

// writeNew creates path with data, failing if it exists.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// cmdSign prints FILE wrapped in a DSSE envelope signed with the private
// key: `scootgate sign --key PRIVATE FILE > FILE.signed`. The kind
// (routes or authz, hence the payload type) comes from the document's
// members unless --kind says it; the document is checked as the node
// would (without a config: credential names are not checked) and an
// invalid one is not signed.
func cmdSign(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("key", "", "the PEM ed25519 private key (scootgate keygen, or openssl genpkey -algorithm ed25519)")
	kind := fs.String("kind", "", `"routes" or "authz"; default: from the document's members`)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *keyFile == "":
		fmt.Fprintln(stderr, "scootgate sign: --key is required")
		return 2
	case fs.NArg() != 1:
		fmt.Fprintln(stderr, "scootgate sign: expected one snapshot FILE")
		return 2
	case *kind != "" && *kind != "routes" && *kind != "authz":
		fmt.Fprintf(stderr, "scootgate sign: --kind %q: expected \"routes\" or \"authz\"\n", *kind)
		return 2
	}
	path := fs.Arg(0)
	text, err := os.ReadFile(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate sign: --key: %v\n", err)
		return 1
	}
	key, err := snapsign.ParsePrivateKey(text)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate sign: --key %s: %v\n", *keyFile, err)
		return 1
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "scootgate sign: %v\n", err)
		return 1
	}
	if snapsign.IsEnvelope(data) {
		fmt.Fprintf(stderr, "scootgate sign: %s is already an envelope; sign the plain snapshot\n", path)
		return 1
	}
	if *kind == "" {
		*kind = detectKind(data)
	}
	payloadType, check := snapsign.RoutesPayloadType, func(b []byte) error { _, err := decodeRoutes(b, nil); return err }
	if *kind == "authz" {
		payloadType, check = snapsign.AuthzPayloadType, func(b []byte) error { _, err := decodeAuthz(b); return err }
	}
	if err := check(data); err != nil {
		ps := problemList(err)
		fmt.Fprintf(stderr, "%s: not signed; %d problem(s) (checked as a %s snapshot):\n", path, len(ps), *kind)
		for _, p := range ps {
			fmt.Fprintf(stderr, "  %s\n", p)
		}
		return 1
	}
	// The payload is the file's exact bytes: nodes decode what was signed.
	if _, err := stdout.Write(snapsign.Sign(payloadType, data, key).Marshal()); err != nil {
		fmt.Fprintf(stderr, "scootgate sign: %v\n", err)
		return 1
	}
	return 0
}

// detectKind names the snapshot kind from its top-level members: "keys"
// is an authorization snapshot, anything else is taken for routes (whose
// checks then say what is missing).
func detectKind(data []byte) string {
	var top map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(data)).Decode(&top) == nil {
		if _, ok := top["keys"]; ok {
			return "authz"
		}
	}
	return "routes"
}
