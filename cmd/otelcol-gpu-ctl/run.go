package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// Environment variables read.
const (
	envServer = "OTELCOL_GPU_CONSOLE_URL" // one URL, or several comma-separated
	envToken  = "OTELCOL_GPU_CONSOLE_TOKEN"
	envCAFile = "OTELCOL_GPU_CONSOLE_CA_FILE"
	// defaultServer is the console's default endpoint.
	defaultServer = "http://localhost:8787"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usageText = `usage: otelcol-gpu-ctl [--server URL]... [--all-addresses] [--ca-file F] [--token-file F] [--operator NAME] [--json] <command>

commands:
  status                          each console's role (owner or standby), version and counts
  faults [--all]                  open faults (--all: resolved ones too), newest first
  fault ID                        one fault with its evidence and links
  ack ID [--reason TEXT]          acknowledge a fault (audited by remediation)
  nodes                           nodes remediation holds out of service, with where each is
                                  in the repair loop (step, time in it, repair#attempt, last verification)
  node NODE                       one quarantined node with its repair loop's history
  release NODE --reason TEXT      return a quarantined node to service
  breaker                         the remediation breaker
  breaker reset --reason TEXT     reset a tripped breaker
  jobs                            jobs with straggler heatmaps
  heatmap JOB [--attempt N] [--ascii] [--all-ranks]
                                  ranks x steps, shaded by compute time / the step's median

flags (before or after the command):
  --server URL       a console (repeatable, or comma-separated; env OTELCOL_GPU_CONSOLE_URL,
                     default http://localhost:8787). With several, every command goes to the
                     one that owns gpu_faults (only it acts; the others refuse controls)
  --all-addresses    ask every address each server's name resolves to (the gateways'
                     headless Service, e.g. https://otelcol-gpu-gateway.otelcol-gpu.svc:8787)
  --ca-file F        the console's CA certificate for https:// (env OTELCOL_GPU_CONSOLE_CA_FILE)
  --token-file F     file holding the API token (else env OTELCOL_GPU_CONSOLE_TOKEN)
  --operator NAME    who is acting, for the audit (default $USER)
  --json             print the API's JSON instead of tables

exit status: 0 ok, 1 error (the API's message), 2 usage
`

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// options are the global flags.
type options struct {
	servers                     serverList
	caFile, tokenFile, operator string
	json, allAddresses          bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.Var(&o.servers, "server", "console URL (repeatable)")
	fs.BoolVar(&o.allAddresses, "all-addresses", o.allAddresses, "every address of each server's name")
	fs.StringVar(&o.caFile, "ca-file", o.caFile, "the console's CA certificate")
	fs.StringVar(&o.tokenFile, "token-file", o.tokenFile, "file holding the API token")
	fs.StringVar(&o.operator, "operator", o.operator, "who is acting")
	fs.BoolVar(&o.json, "json", o.json, "print the API's JSON")
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags anywhere among args and returns the positional
// arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usageError{""}
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// run is the command; main exits with its result.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := runCtx(ctx, args, stdout)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintf(stderr, "otelcol-gpu-ctl: %s\n\n", ue.msg)
		}
		fmt.Fprint(stderr, usageText)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "otelcol-gpu-ctl: %v\n", err)
		return exitError
	}
}

func runCtx(ctx context.Context, args []string, stdout io.Writer) error {
	opts := options{caFile: os.Getenv(envCAFile), operator: os.Getenv("USER")}
	if env := os.Getenv(envServer); env != "" {
		_ = opts.servers.Set(env)
	} else {
		opts.servers.urls = []string{defaultServer}
	}
	opts.servers.set = false // --server replaces the environment's
	global := newFlagSet("otelcol-gpu-ctl")
	opts.register(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{""}
		}
		return usagef("%v", err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		return usagef("no command")
	}
	cmd, rest := rest[0], rest[1:]

	fs := newFlagSet(cmd)
	opts.register(fs)
	all := fs.Bool("all", false, "include resolved faults")
	reason := fs.String("reason", "", "why (for the audit)")
	attempt := fs.Int64("attempt", -1, "the job's attempt (default: the highest)")
	ascii := fs.Bool("ascii", false, "ASCII heatmap")
	allRanks := fs.Bool("all-ranks", false, "every rank of a large heatmap")
	pos, err := parse(fs, rest)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	allowed := map[string][]string{
		"status": nil, "faults": {"all"}, "fault": nil, "ack": {"reason"}, "nodes": nil, "node": nil,
		"release": {"reason"}, "breaker": {"reason"}, "jobs": nil, "heatmap": {"attempt", "ascii", "all-ranks"},
	}
	own, known := allowed[cmd]
	if !known {
		return usagef("unknown command %q", cmd)
	}
	for name := range set {
		if !contains([]string{"server", "all-addresses", "ca-file", "token-file", "operator", "json"}, name) && !contains(own, name) {
			return usagef("%s does not take --%s", cmd, name)
		}
	}
	wantArgs := map[string][]int{
		"status": {0}, "faults": {0}, "fault": {1}, "ack": {1}, "nodes": {0}, "node": {1}, "release": {1},
		"breaker": {0, 1}, "jobs": {0}, "heatmap": {1},
	}[cmd]
	if !contains(wantArgs, len(pos)) {
		return usagef("%s takes %s, got %q", cmd, map[string]string{
			"fault": "a fault ID", "ack": "a fault ID", "node": "a node name", "release": "a node name", "heatmap": "a job name", "breaker": "nothing or reset",
		}[cmd], pos)
	}
	if cmd == "breaker" && len(pos) == 1 && pos[0] != "reset" {
		return usagef("breaker takes nothing or reset, got %q", pos[0])
	}
	if cmd == "breaker" && len(pos) == 0 && set["reason"] {
		return usagef("breaker does not take --reason (breaker reset does)")
	}
	mutating := cmd == "ack" || cmd == "release" || (cmd == "breaker" && len(pos) == 1)
	if mutating {
		*reason = strings.TrimSpace(*reason)
		if cmd != "ack" && *reason == "" {
			return usagef("%s needs --reason: say why, it goes to the remediation audit", strings.Join(append([]string{cmd}, pos...), " "))
		}
		if strings.TrimSpace(opts.operator) == "" {
			return usagef("%s needs --operator NAME ($USER is not set)", cmd)
		}
	}
	token, err := readToken(opts.tokenFile)
	if err != nil {
		return err
	}
	action := consoleclient.Action{Operator: strings.TrimSpace(opts.operator), Reason: *reason}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ts, err := targets(ctx, opts.servers.urls, opts.allAddresses, opts.caFile, token)
	if err != nil {
		return err
	}
	out := &printer{w: stdout, json: opts.json, ascii: *ascii, allRanks: *allRanks}
	if len(ts) == 0 {
		return fmt.Errorf("no console to ask: %s resolved to no address", strings.Join(opts.servers.urls, ", "))
	}
	c := ts[0].client
	if len(ts) > 1 || opts.allAddresses {
		as := statuses(ctx, ts)
		switch cmd {
		case "status":
			return printStatuses(out, as)
		case "jobs":
			return printAllJobs(ctx, out, as)
		}
		o, err := owner(as)
		if err != nil {
			return err
		}
		c = o.client
		if cmd == "heatmap" {
			return printAnyHeatmap(ctx, out, o, as, pos[0], *attempt)
		}
	}
	return one(ctx, out, c, cmd, pos, action, *all, *attempt)
}

// one runs cmd against the console c.
func one(ctx context.Context, out *printer, c *consoleclient.Client, cmd string, pos []string, action consoleclient.Action, all bool, attempt int64) error {
	switch cmd {
	case "status":
		v, raw, err := c.Status(ctx)
		return out.print(raw, err, func() { printStatus(out, v) })
	case "faults":
		v, raw, err := c.Faults(ctx, all)
		return out.print(raw, err, func() { printFaults(out, v.Faults) })
	case "fault":
		v, raw, err := c.Fault(ctx, pos[0])
		return out.print(raw, err, func() { printFault(out, v) })
	case "ack":
		v, raw, err := c.Ack(ctx, pos[0], action)
		return out.print(raw, notOwnerHint(err), func() { fmt.Fprintf(out.w, "acknowledged fault %s as %s\n", v.ID, action.Operator) })
	case "nodes":
		v, raw, err := c.Nodes(ctx)
		return out.print(raw, err, func() { printNodes(out, v.Nodes) })
	case "node":
		v, raw, err := c.Node(ctx, pos[0])
		return out.print(raw, err, func() { printNode(out, v) })
	case "release":
		v, raw, err := c.Release(ctx, pos[0], action)
		return out.print(raw, notOwnerHint(err), func() { fmt.Fprintf(out.w, "released node %s: %s\n", v.Node, v.Detail) })
	case "breaker":
		if len(pos) == 1 {
			v, raw, err := c.ResetBreaker(ctx, action)
			return out.print(raw, notOwnerHint(err), func() {
				fmt.Fprintf(out.w, "breaker reset by %s\n", action.Operator)
				if v.Breaker != nil {
					printBreaker(out, *v.Breaker)
				} else if v.BreakerError != "" {
					fmt.Fprintf(out.w, "(reading the breaker after the reset failed: %s)\n", v.BreakerError)
				}
			})
		}
		v, raw, err := c.Breaker(ctx)
		return out.print(raw, err, func() { printBreaker(out, v) })
	case "jobs":
		v, raw, err := c.Jobs(ctx)
		return out.print(raw, err, func() { printJobs(out, v.Jobs) })
	default: // heatmap
		v, raw, err := c.Heatmap(ctx, pos[0], attempt)
		return out.print(raw, err, func() { printHeatmap(out, v) })
	}
}

// readToken reads the token from file, else from the environment.
func readToken(file string) (string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", fmt.Errorf("--token-file %q is empty", file)
		}
		return tok, nil
	}
	if tok := strings.TrimSpace(os.Getenv(envToken)); tok != "" {
		return tok, nil
	}
	return "", usagef("no API token: pass --token-file FILE or set %s (the token is in the console's token_file)", envToken)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// printer writes an answer as tables or as the API's JSON.
type printer struct {
	w               io.Writer
	json            bool
	ascii, allRanks bool
}

func (p *printer) print(raw []byte, err error, table func()) error {
	if err != nil {
		return err
	}
	if p.json {
		var buf bytes.Buffer
		if json.Indent(&buf, bytes.TrimSpace(raw), "", "  ") != nil {
			_, err := p.w.Write(raw)
			return err
		}
		buf.WriteByte('\n')
		_, err := p.w.Write(buf.Bytes())
		return err
	}
	table()
	return nil
}
