package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// hostCommands are the subcommands of `idemrun host`.
func hostCommands() []command {
	return []command{
		{"list", "show each host's policy and waiting jobs", (*Main).hostList},
		{"set", "set a host's rate, burst, concurrency or settle window", (*Main).hostSet},
		{"unset", "delete a host's own policy (the default * applies)", (*Main).hostUnset},
		{"pause", "stop every attempt and status query to a host", (*Main).hostPause},
		{"resume", "end a host's pause", (*Main).hostResume},
	}
}

// host runs `idemrun host SUBCOMMAND`.
func (m *Main) host(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.hostUsage(m.Stderr)
		return usagef("host: give a subcommand")
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		m.hostUsage(m.Stdout)
		return nil
	}
	for _, c := range hostCommands() {
		if c.name == args[0] {
			return c.run(m, ctx, args[1:])
		}
	}
	m.hostUsage(m.Stderr)
	return usagef("host: unknown subcommand %q", args[0])
}

func (m *Main) hostUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idemrun host SUBCOMMAND [flags]   (idemrun host SUBCOMMAND --help for its flags)")
	fmt.Fprintln(w)
	for _, c := range hostCommands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "HOST is the URL's host as written, with :port when not the scheme's default; * is the default policy.")
}

// hostArg parses the one HOST argument of a host subcommand.
func hostArg(name string, fs *pflag.FlagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", usagef("host %s: give exactly one HOST", name)
	}
	return api.ParseHost(fs.Arg(0))
}

// hostService opens the database of a host subcommand; one that sets a
// policy (set, pause) creates a bbolt file that does not exist yet, so
// policies may come before the first job.
func (m *Main) hostService(fs *pflag.FlagSet, db string, create bool) (*api.Client, error) {
	dbt, err := m.db(fs, db)
	if err != nil {
		return nil, err
	}
	return m.openService(dbt, create)
}

func (m *Main) hostSet(ctx context.Context, args []string) error {
	fs, db := m.flags("host set", "HOST [--rate N/s] [--burst N] [--concurrency N] [--settle DURATION]")
	rate := fs.String("rate", "", "most requests per second, minute or hour: 40/s, 100/m, 500/h")
	burst := fs.Int("burst", 0, "requests that may go at once after a quiet spell (default a tenth of a second's worth of --rate)")
	conc := fs.Int("concurrency", 0, "most requests in flight at once")
	settle := fs.Duration("settle", 0, "how long after an attempt started a status answer of \"not found\" may lead to a replay (0s to 1h)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	host, err := hostArg("set", fs)
	if err != nil {
		return err
	}
	var s api.HostSettings
	if fs.Changed("rate") {
		r, err := api.ParseRate(*rate)
		if err != nil {
			return err
		}
		s.Rate = &r
	}
	if fs.Changed("burst") {
		s.Burst = burst
	}
	if fs.Changed("concurrency") {
		s.Concurrency = conc
	}
	if fs.Changed("settle") {
		s.Settle = settle
	}
	if s == (api.HostSettings{}) {
		return usagef("host set: give at least one of --rate, --burst, --concurrency, --settle")
	}
	// Bad input is refused before any database is opened or created.
	if err := s.Check(); err != nil {
		return err
	}
	svc, err := m.hostService(fs, *db, true)
	if err != nil {
		return err
	}
	defer svc.Close()
	p, err := svc.SetHost(ctx, host, s, api.Actor())
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "host set: %s: rate %s, burst %s, concurrency %s, settle %s\n",
		p.Host, rateText(p.Rate), countText(p.Burst), countText(p.Concurrency), settleText(p.Settle))
	return nil
}

// onHost runs a host subcommand that takes one HOST: it parses args
// (more flags from more, if any), opens the database and calls do.
func (m *Main) onHost(args []string, name, usage string, more func(fs *pflag.FlagSet), do func(svc *api.Client, host string) error) error {
	create := name == "pause"
	fs, db := m.flags("host "+name, usage)
	if more != nil {
		more(fs)
	}
	if err := m.parse(fs, args); err != nil {
		return err
	}
	host, err := hostArg(name, fs)
	if err != nil {
		return err
	}
	svc, err := m.hostService(fs, *db, create)
	if err != nil {
		return err
	}
	defer svc.Close()
	return do(svc, host)
}

func (m *Main) hostUnset(ctx context.Context, args []string) error {
	return m.onHost(args, "unset", "HOST", nil, func(svc *api.Client, host string) error {
		if err := svc.UnsetHost(ctx, host); err != nil {
			return err
		}
		if host == store.DefaultHost {
			fmt.Fprintf(m.Stdout, "host unset: the default policy is deleted: a host is held only to its own policy, if it has one\n")
			return nil
		}
		fmt.Fprintf(m.Stdout, "host unset: %s has no policy of its own now: the default (*) applies\n", host)
		return nil
	})
}

func (m *Main) hostPause(ctx context.Context, args []string) error {
	var note *string
	return m.onHost(args, "pause", "HOST [--note TEXT]", func(fs *pflag.FlagSet) {
		note = fs.String("note", "", "why (shown by host list)")
	}, func(svc *api.Client, host string) error {
		p, err := svc.PauseHost(ctx, host, api.Actor(), *note)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "host pause: %s is paused: runners start no attempt or status query to it from their next policy reload (within a second) until `idemrun host resume %s`\n", p.Host, shellQuote(p.Host))
		return nil
	})
}

func (m *Main) hostResume(ctx context.Context, args []string) error {
	return m.onHost(args, "resume", "HOST", nil, func(svc *api.Client, host string) error {
		p, err := svc.ResumeHost(ctx, host, api.Actor())
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "host resume: %s is not paused\n", p.Host)
		return nil
	})
}

// hostJSON is one host of `host list --json`: its own policy (null when
// it has none) and its waiting jobs.
type hostJSON struct {
	Host    string      `json:"host"`
	Policy  *policyJSON `json:"policy"`
	Pending int64       `json:"pending"`
	Unknown int64       `json:"unknown"`
	Due     int64       `json:"due"`
	// CountsPartial: the counts stopped at api.MaxHostScan jobs a state.
	CountsPartial bool `json:"counts_partial,omitempty"`
	// Traffic is what the live runners saw of the host lately (null when
	// none reports it).
	Traffic *api.HostTraffic `json:"traffic"`
}

// policyJSON is a host's own policy as `host list --json` prints it:
// the rate as --rate takes it and in requests per second, the settle
// window as a duration.
type policyJSON struct {
	Rate          *string   `json:"rate"`
	RatePerSecond float64   `json:"rate_per_second,omitempty"`
	Burst         int       `json:"burst,omitempty"`
	Concurrency   int       `json:"concurrency,omitempty"`
	Settle        string    `json:"settle,omitempty"`
	Paused        bool      `json:"paused"`
	Note          string    `json:"note,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
	UpdatedBy     string    `json:"updated_by,omitempty"`
}

func policyOf(p *api.HostPolicy) *policyJSON {
	if p == nil {
		return nil
	}
	out := &policyJSON{RatePerSecond: p.Rate, Burst: p.Burst, Concurrency: p.Concurrency, Paused: p.Paused, Note: p.Note, UpdatedAt: p.UpdatedAt, UpdatedBy: p.UpdatedBy}
	if p.Rate > 0 {
		r := api.FormatRate(p.Rate)
		out.Rate = &r
	}
	if p.Settle > 0 {
		out.Settle = p.Settle.String()
	}
	return out
}

func (m *Main) hostList(ctx context.Context, args []string) error {
	fs, db := m.flags("host list", "[--json]")
	asJSON := fs.Bool("json", false, "print an array of hosts, each with its own policy (or null), its waiting jobs and its recent traffic (or null)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("host list: unexpected argument %q", fs.Arg(0))
	}
	svc, err := m.hostService(fs, *db, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	hs, err := svc.Hosts(ctx)
	if err != nil {
		return err
	}
	partial := false
	for _, h := range hs {
		partial = partial || h.Partial
	}
	if partial {
		fmt.Fprintf(m.Stderr, "idemrun: warning: host list counted the first %d jobs of each state only: the counts marked + are at least these\n", api.MaxHostScan)
	}
	if *asJSON {
		out := make([]hostJSON, len(hs))
		for i, h := range hs {
			out[i] = hostJSON{Host: h.Host, Policy: policyOf(h.Policy), Pending: h.Pending, Unknown: h.Unknown, Due: h.Due, CountsPartial: h.Partial, Traffic: h.Traffic}
		}
		return m.printJSON(out)
	}
	var def *api.HostPolicy
	for _, h := range hs {
		if h.Host == store.DefaultHost {
			def = h.Policy
		}
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPOLICY\tRATE\tBURST\tCONC\tSETTLE\tPAUSED\tPENDING\tUNKNOWN\tDUE\tIN-FLIGHT\tSEND-RATE\t429\t5XX\tTIMEOUTS\tBREAKER\tNOTE")
	for _, h := range hs {
		// The figures the host follows: what its own policy leaves unset
		// is the default's.
		var own, dp api.HostPolicy
		if def != nil {
			dp = *def
		}
		which := "*"
		if h.Policy != nil {
			own, which = *h.Policy, "own"
		} else if def == nil {
			which = "none"
		}
		p := store.Follows(own, h.Policy != nil, dp)
		paused := "no"
		if p.Paused {
			paused = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			printable(h.Host), which, rateText(p.Rate), countText(p.Burst), countText(p.Concurrency), settleText(p.Settle), paused,
			jobCount(h.Pending, h.Partial), jobCount(h.Unknown, h.Partial), jobCount(h.Due, h.Partial), trafficText(h.Traffic), trunc(printable(p.Note), 60))
	}
	return tw.Flush()
}

// trafficText is the IN-FLIGHT to BREAKER columns of host list.
func trafficText(t *api.HostTraffic) string {
	if t == nil {
		return "-\t-\t-\t-\t-\t-"
	}
	breaker := t.Breaker
	if t.Throttled {
		breaker += ",throttled"
	}
	return fmt.Sprintf("%d\t%s/s\t%d\t%d\t%d\t%s", t.InFlight, strconv.FormatFloat(t.SendRate, 'f', 1, 64), t.TooMany, t.ServerErrors, t.Timeouts, breaker)
}

func rateText(r float64) string {
	if r <= 0 {
		return "-"
	}
	return api.FormatRate(r)
}

func countText(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func settleText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.String()
}

// jobCount is a count of host list, marked + when counting stopped.
func jobCount(n int64, partial bool) string {
	s := strconv.FormatInt(n, 10)
	if partial {
		s += "+"
	}
	return s
}
