package runner

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// traffic decides what the runner may send to each target host now: the
// host policies of the store (pause, rate, concurrency, settle), the
// back-pressure of hosts that answered 429 or 503 with Retry-After, and
// the health of hosts whose sends fail (fewer at once, then a breaker).
// A claim asks it which hosts to pass over (skip) and admits each job
// (admit), which takes a token and a slot; release gives the slot back.
type traffic struct {
	cfg     trafficConfig
	hosts   store.Hosts // nil: the store keeps no policies
	leases  func() ([]store.Lease, error)
	now     func() time.Time
	born    time.Time // when the runner's traffic began: rates over its life until a window has passed
	log     *slog.Logger
	loading sync.Mutex // one reload at a time

	mu       sync.Mutex
	policies map[string]store.HostPolicy
	loadedAt time.Time
	runners  int // live runners sharing each policy's rate
	state    map[string]*hostState
	// alone is the host the last claim that judged it found alone among
	// the jobs due: Admit refused it and no other host was asked about
	// after, or it was full and nothing else was due (judgeAlone).
	// Empty: not known to be alone.
	alone string
	// skip is the hosts passed over as of skipAt; dirty forces a rebuild,
	// expires is when it must be rebuilt anyway.
	// skipQuery is the same for status queries, which may probe a host
	// whose breaker is open (see blocked).
	skip, skipQuery []string
	dirty           bool
	expires         time.Time
}

// trafficConfig is traffic's part of Config.
type trafficConfig struct {
	// workers is the slots of a host alone, and the most a host's limit
	// grows to: the jobs the runner holds, claimed ahead included.
	// senders is the workers that send: the shares of a new or failing
	// host are of them, so such a host never holds more of the workers
	// than its share, however many jobs are claimed ahead.
	workers  int
	senders  int
	reload   time.Duration
	share    float64
	breaker  breakerConfig
	throttle throttleConfig
	idle     time.Duration // a host's state is forgotten after it
}

// hostState is what the runner knows of one host.
type hostState struct {
	inflight int
	// limit is how many sends may be in flight: it starts at a share of
	// the workers (newHostShare), grows by one with each answered send
	// up to all of them, and falls back to the failing share with a
	// failed one. Sending to no other host is not enough to get all the
	// workers at once: a claim must find its jobs alone among those due.
	limit    float64
	breaker  breaker
	throttle throttle
	lim      *rate.Limiter // nil: no rate applies
	limRate  float64
	limBurst int
	// answers counts good answers in the current and previous second.
	sec       int64
	cur, prev int
	// pushes counts push-backs (429, 503 with Retry-After) so, per second.
	pushes       window
	used         time.Time
	sends, waits uint64
	n429, n5xx   uint64
	failures     uint64
	recent       recent // the same, over the last store.TrafficWindow
	// sending counts the sends and status queries under way: inflight
	// less the jobs claimed ahead that no worker has taken up yet.
	sending int
	// probing: a status query is in flight that an open breaker let
	// through; at most one at a time.
	probing bool
}

func newTraffic(cfg trafficConfig, s any, now func() time.Time, log *slog.Logger) *traffic {
	t := &traffic{cfg: cfg, now: now, born: now(), log: log, state: map[string]*hostState{}, runners: 1, dirty: true}
	if h, ok := s.(store.Hosts); ok {
		t.hosts = h
	}
	if w, ok := s.(interface {
		Leases() ([]store.Lease, error)
	}); ok {
		t.leases = w.Leases
	}
	return t
}

// refresh reloads the policies and the count of live runners when the
// cached ones are older than the reload interval.
func (t *traffic) refresh(now time.Time) {
	t.mu.Lock()
	fresh := now.Sub(t.loadedAt) < t.cfg.reload
	t.mu.Unlock()
	if fresh || t.hosts == nil || !t.loading.TryLock() {
		return
	}
	defer t.loading.Unlock()
	ps, err := t.hosts.HostPolicies()
	runners := 0
	if t.leases != nil {
		if ls, lerr := t.leases(); lerr == nil {
			for _, l := range ls {
				if l.Alive(now) {
					runners++
				}
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loadedAt = now
	if err != nil {
		t.log.Warn("host policies not reloaded; the last ones stay in force", "err", err)
		return
	}
	m := make(map[string]store.HostPolicy, len(ps))
	for _, p := range ps {
		m[p.Host] = p
	}
	t.logChanges(t.policies, m)
	t.policies = m
	t.runners = max(1, runners)
	t.dirty = true
}

// samePolicy reports whether a and b hold the same settings and change.
func samePolicy(a, b store.HostPolicy) bool {
	return a.Rate == b.Rate && a.Burst == b.Burst && a.Concurrency == b.Concurrency && a.Settle == b.Settle &&
		a.Paused == b.Paused && a.Note == b.Note && a.UpdatedAt.Equal(b.UpdatedAt)
}

// logChanges logs how the policies went from old to new: a host paused
// or resumed, a policy set, changed or removed. At the first load (old
// nil) it logs only the hosts that are paused, so a runner says at its
// start which hosts it holds back.
func (t *traffic) logChanges(old, new map[string]store.HostPolicy) {
	for host, p := range new {
		o, had := old[host]
		switch {
		case p.Paused && !o.Paused:
			t.log.Warn("host paused: no attempt or status query goes to it until it is resumed", "host", host, "note", p.Note, "by", p.UpdatedBy)
		case !p.Paused && o.Paused:
			t.log.Info("host resumed", "host", host, "by", p.UpdatedBy)
		case old != nil && (!had || !samePolicy(p, o)):
			t.log.Info("host policy set", "host", host, "rate", p.Rate, "burst", p.Burst, "concurrency", p.Concurrency, "settle", p.Settle, "by", p.UpdatedBy)
		}
	}
	for host, o := range old {
		if _, ok := new[host]; !ok {
			if o.Paused {
				t.log.Info("host resumed", "host", host, "why", "its policy was removed")
			} else {
				t.log.Info("host policy removed", "host", host)
			}
		}
	}
}

// policy is the policy host follows (store.Follows); t.mu is held.
func (t *traffic) policy(host string) store.HostPolicy {
	own, ok := t.policies[host]
	return store.Follows(own, ok, t.policies[store.DefaultHost])
}

// host returns host's state, made on first use; t.mu is held.
func (t *traffic) host(host string, now time.Time) *hostState {
	h := t.state[host]
	if h == nil {
		h = &hostState{limit: max(1, math.Floor(float64(t.cfg.senders)*newHostShare))}
		t.state[host] = h
	}
	h.used = now
	return h
}

// newHostShare is the share of the workers a host may hold until it
// answers, even when it is the only host the runner has sent to: a host
// new to the runner that never answers cannot take them all before its
// first timeout shows it, and the claims pass over its jobs to those of
// other hosts due behind them. Each good answer raises the limit by
// one, so a host that answers doubles its sends each round trip and
// reaches all the workers within a round trip or two; a host whose jobs
// a claim finds alone among those due takes them all at once.
const newHostShare = 0.5

// startLimit is the sends in flight a failing host may have at most: a
// share of the workers.
func (t *traffic) startLimit() float64 {
	return max(1, math.Floor(float64(t.cfg.senders)*t.cfg.share))
}

// concurrency is the most sends to a host in flight now: its health's
// limit and its policy's share; t.mu is held.
func (t *traffic) concurrency(h *hostState, p store.HostPolicy) int {
	n := int(h.limit)
	if len(t.state) == 1 && t.state[t.alone] == h && h.limit >= math.Floor(float64(t.cfg.senders)*newHostShare) {
		// The only host with jobs due, as a claim that passed over its
		// own found, and not failing: there is no other to keep room
		// for. Sending to it alone is not enough: other hosts' jobs may
		// be due behind its own.
		n = t.cfg.workers
	}
	if h.breaker.state == breakerHalfOpen {
		n = 1
	}
	if p.Concurrency > 0 {
		n = min(n, max(1, (p.Concurrency+t.runners-1)/t.runners))
	}
	return max(1, n)
}

// applyRate makes h's limiter the smaller of its policy's share of the
// rate and its throttle; t.mu is held.
func (t *traffic) applyRate(h *hostState, p store.HostPolicy, now time.Time) {
	r, burst := 0.0, 0
	if p.Rate > 0 {
		r = p.Rate / float64(t.runners)
		burst = p.Burst
		if burst <= 0 {
			// A tenth of a second's worth: a bucket may send its burst
			// on top of a second's worth, so any second sees at most
			// 1.1 times the rate.
			burst = int(math.Ceil(p.Rate / 10))
		}
		burst = max(1, (burst+t.runners-1)/t.runners)
	}
	if tr := h.throttle.rate; tr > 0 && (r == 0 || tr < r) {
		r, burst = tr, max(1, int(tr/10))
	}
	switch {
	case r == 0:
		h.lim = nil
	case h.lim == nil:
		h.lim = rate.NewLimiter(rate.Limit(r), burst)
		h.lim.AllowN(now, burst) // start empty: the host was just pushed back, or is new to its limit
	case r != h.limRate || burst != h.limBurst:
		h.lim.SetLimitAt(now, rate.Limit(r))
		h.lim.SetBurstAt(now, burst)
	}
	h.limRate, h.limBurst = r, burst
}

// blocked says whether host h may not take a send (query: a status
// query) at now, and until when at the latest that answer holds; t.mu is
// held. An open breaker still lets one status query at a time through:
// a host whose creates time out may answer its status endpoint, and its
// unknown jobs should not wait out the cool-down; an answer closes the
// breaker, and a query that fails holds one worker for its timeout.
func (t *traffic) blocked(host string, h *hostState, now time.Time, query bool) (bool, time.Time) {
	p := t.policy(host)
	if p.Paused {
		return true, time.Time{}
	}
	if h == nil {
		return false, time.Time{}
	}
	if h.breaker.tick(now) {
		t.logBreaker(host, h)
	}
	switch {
	case h.breaker.state == breakerOpen && (!query || h.probing):
		return true, h.breaker.until
	case h.throttle.held(now):
		return true, h.throttle.hold
	case h.inflight >= t.concurrency(h, p):
		return true, time.Time{}
	}
	t.applyRate(h, p, now)
	if h.lim != nil {
		if tok := h.lim.TokensAt(now); tok < 1 {
			wait := time.Duration((1 - tok) / float64(h.lim.Limit()) * float64(time.Second))
			return true, now.Add(max(wait, time.Millisecond))
		}
	}
	return false, time.Time{}
}

// skipHosts returns the hosts a claim of sends passes over at now, nil
// when none.
func (t *traffic) skipHosts(now time.Time) []string { return t.skipFor(now, false) }

// skipQueries is skipHosts for a claim of status queries.
func (t *traffic) skipQueries(now time.Time) []string { return t.skipFor(now, true) }

func (t *traffic) skipFor(now time.Time, query bool) []string {
	t.refresh(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dirty || (!t.expires.IsZero() && !now.Before(t.expires)) {
		t.rebuildSkip(now)
	}
	if query {
		return t.skipQuery
	}
	return t.skip
}

// rebuildSkip computes both skip lists; t.mu is held.
func (t *traffic) rebuildSkip(now time.Time) {
	var skip, skipQuery []string
	var next time.Time
	for host, p := range t.policies {
		if p.Paused && host != store.DefaultHost {
			skip = append(skip, host)
			skipQuery = append(skipQuery, host)
		}
	}
	for host, h := range t.state {
		if p, ok := t.policies[host]; ok && p.Paused {
			continue
		}
		if h.inflight == 0 && now.Sub(h.used) > t.cfg.idle && h.breaker.state == breakerClosed && h.throttle.rate == 0 {
			delete(t.state, host) // forgotten: a new start
			continue
		}
		b, until := t.blocked(host, h, now, false)
		if b {
			skip = append(skip, host)
			if !until.IsZero() && (next.IsZero() || until.Before(next)) {
				next = until
			}
		}
		// A query differs from a send only past an open breaker.
		if h.breaker.state == breakerOpen && !h.probing {
			b, _ = t.blocked(host, h, now, true)
		}
		if b {
			skipQuery = append(skipQuery, host)
		}
	}
	t.skip, t.skipQuery, t.dirty, t.expires = skip, skipQuery, false, next
	if reload := t.loadedAt.Add(t.cfg.reload); t.hosts != nil && (t.expires.IsZero() || reload.Before(t.expires)) {
		t.expires = reload
	}
}

// admit takes a slot and a token for one send (query: a status query)
// to host, or refuses.
func (t *traffic) admit(host string, query bool) bool {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.host(host, now)
	if b, _ := t.blocked(host, h, now, query); b || (h.lim != nil && !h.lim.AllowN(now, 1)) {
		if h.lim != nil && h.lim.TokensAt(now) < 1 {
			h.waits++
		}
		t.dirty = true
		return false
	}
	h.inflight++
	h.sends++
	h.recent.add(now, figSend)
	if query && h.breaker.state == breakerOpen {
		h.probing = true
		t.dirty = true
	}
	if h.inflight >= t.concurrency(h, t.policy(host)) || h.lim != nil {
		t.dirty = true
	}
	return true
}

// queried ends the status query to host an open breaker let through, if
// one was in flight: what it showed is observed next.
func (t *traffic) queried(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.state[host]; h != nil && h.probing {
		h.probing = false
		t.dirty = true
	}
}

// begin and end bracket a worker's send or status query to host: what
// host list shows in flight.
func (t *traffic) begin(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.state[host]; h != nil {
		h.sending++
	}
}

func (t *traffic) end(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.state[host]; h != nil && h.sending > 0 {
		h.sending--
	}
}

// release gives back a slot admit took.
func (t *traffic) release(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.state[host]; h != nil && h.inflight > 0 {
		if h.inflight >= t.concurrency(h, t.policy(host)) {
			t.dirty = true // it was at its concurrency: skipped until now
		}
		h.inflight--
	}
}

// sendOutcome is what one send to a host showed of it.
type sendOutcome int

const (
	outcomeAnswered  sendOutcome = iota // an answer, and not a push-back
	outcomeFailed                       // a timeout, or a refused or broken connection
	outcomePushBack                     // 429 or 503 with Retry-After
	outcomeNotJudged                    // nothing sent, or the runner stopping
)

// observe records what a send to host showed: ra is the Retry-After of
// a push-back, status the HTTP status of an answer.
func (t *traffic) observe(host string, o sendOutcome, status int, ra time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.state[host]
	if h == nil {
		return
	}
	switch {
	case status == 429:
		h.n429++
		h.recent.add(now, fig429)
	case status >= 500:
		h.n5xx++
		h.recent.add(now, fig5xx)
	}
	switch o {
	case outcomeAnswered:
		h.count(now)
		if h.limit >= float64(t.cfg.workers) && h.breaker.state == breakerClosed && h.breaker.fails == 0 && h.throttle.rate == 0 {
			return // a healthy host: nothing changes
		}
		h.limit = min(h.limit+1, float64(t.cfg.workers))
		if h.breaker.succeeded() {
			t.logBreaker(host, h)
		}
		if h.throttle.answered(now, t.cfg.throttle) {
			t.log.Info("host no longer throttled", "host", host)
		}
	case outcomeFailed:
		h.failures++
		h.recent.add(now, figFailed)
		h.limit = min(h.limit, t.startLimit())
		// A host that answered in the last second is failing some sends,
		// not down: it keeps its breaker closed (a failed probe still
		// counts).
		if (h.breaker.state != breakerClosed || h.answeredRate(now) == 0) && h.breaker.failed(now, t.cfg.breaker) {
			t.logBreaker(host, h)
		}
	case outcomePushBack:
		if h.breaker.succeeded() {
			t.logBreaker(host, h)
		}
		h.pushes.add(now)
		// A push-back now and then is the job's own to wait for (its
		// Retry-After); the whole host is held back when it pushes back
		// on a share of what it is sent.
		pushed, good := h.pushes.rate(now), h.answeredRate(now)
		if pushed < minPushBacks || pushed < pushBackShare*(pushed+good) {
			break
		}
		before := h.throttle.rate
		h.throttle.pushedBack(now, ra, good, t.cfg.throttle)
		if h.throttle.rate != before {
			t.log.Info("host throttled", "host", host, "rate", math.Round(h.throttle.rate*10)/10, "hold", ra)
		}
	}
	t.dirty = true
}

// A host is throttled once it pushed back at least minPushBacks times in
// about a second, and on at least pushBackShare of its answers.
const (
	minPushBacks  = 5
	pushBackShare = 0.5
)

// window counts events in the current and the previous second.
type window struct {
	sec       int64
	cur, prev int
}

func (w *window) add(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == w.sec:
	case sec == w.sec+1:
		w.prev, w.cur, w.sec = w.cur, 0, sec
	default:
		w.prev, w.cur, w.sec = 0, 0, sec
	}
	w.cur++
}

// rate is the events of about the last second.
func (w *window) rate(now time.Time) float64 {
	frac := float64(now.Nanosecond()) / 1e9
	switch now.Unix() {
	case w.sec:
		return float64(w.prev)*(1-frac) + float64(w.cur)
	case w.sec + 1:
		return float64(w.cur) * (1 - frac)
	}
	return 0
}

// count adds a good answer to the current second's.
func (h *hostState) count(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == h.sec:
	case sec == h.sec+1:
		h.prev, h.cur, h.sec = h.cur, 0, sec
	default:
		h.prev, h.cur, h.sec = 0, 0, sec
	}
	h.cur++
}

// answeredRate is the good answers of about the last second.
func (h *hostState) answeredRate(now time.Time) float64 {
	sec := now.Unix()
	frac := float64(now.Nanosecond()) / 1e9
	switch sec {
	case h.sec:
		return float64(h.prev)*(1-frac) + float64(h.cur)
	case h.sec + 1:
		return float64(h.cur) * (1 - frac)
	}
	return 0
}

func (t *traffic) logBreaker(host string, h *hostState) {
	t.log.Warn("host breaker "+h.breaker.state.String(), "host", host, "failures", h.breaker.fails, "cooldown", h.breaker.cooldown)
}

// admissions records what admit promised during one claim, so the
// promises of jobs that were not claimed after all are given back.
type admissions struct {
	t     *traffic
	query bool // the claim is of status queries
	mu    sync.Mutex
	hosts map[string]int
	order []string // the hosts admitted, in order
	// asked is the hosts Admit was asked about, refused the first one
	// it refused.
	asked   []string
	refused string
}

func (t *traffic) round() *admissions { return &admissions{t: t} }

// queryRound is round for a claim of status queries.
func (t *traffic) queryRound() *admissions { return &admissions{t: t, query: true} }

// admit is ClaimRequest.Admit.
func (a *admissions) admit(host string) bool {
	ok := a.t.admit(host, a.query)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.asked, host) {
		a.asked = append(a.asked, host)
	}
	if !ok {
		if a.refused == "" {
			a.refused = host
		}
		return false
	}
	if a.hosts == nil {
		a.hosts = map[string]int{}
	}
	a.hosts[host]++
	a.order = append(a.order, host)
	return true
}

// settle matches the claims made against the promises and gives back the
// rest; it returns each claim's host.
func (a *admissions) settle(claims ...*store.Claim) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.judgeAlone(claims)
	out := make([]string, len(claims))
	if a.aligned(claims) {
		copy(out, a.order)
		a.hosts, a.order = nil, nil
		return out
	}
	for i, c := range claims {
		if c == nil {
			continue
		}
		h := store.ClaimHost(c.Job)
		out[i] = h
		if a.hosts[h] > 0 {
			a.hosts[h]--
		} else {
			// Claimed without a promise (not asked): it holds a slot all
			// the same, so release stays balanced.
			a.t.take(h)
		}
	}
	for h, n := range a.hosts {
		for range n {
			a.t.release(h)
		}
	}
	a.hosts, a.order = nil, nil
	return out
}

// judgeAlone tells traffic what the claim showed of the hosts due: a
// host Admit refused, with no other asked about, is alone among the jobs
// due (the claim passed over its jobs and found none of another host);
// a claim that asked about two hosts or more shows none is. So is the
// one host the runner sends to, full and so passed over, when a claim
// finds nothing else due. a.mu is held.
func (a *admissions) judgeAlone(claims []*store.Claim) {
	switch {
	case a.refused != "" && len(a.asked) == 1:
		a.t.setAlone(a.refused)
	case len(a.asked) > 1:
		a.t.setAlone("")
	case len(a.asked) == 0 && !slices.ContainsFunc(claims, func(c *store.Claim) bool { return c != nil }):
		a.t.aloneIfFull()
	}
	a.asked, a.refused = a.asked[:0], ""
}

// aloneIfFull makes the only host in t.state alone when it is passed
// over for being at its concurrency, nothing else.
func (t *traffic) aloneIfFull() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.state) != 1 {
		return
	}
	for host, h := range t.state {
		p := t.policy(host)
		if !p.Paused && h.breaker.state == breakerClosed && h.throttle.rate == 0 && h.inflight >= t.concurrency(h, p) && t.alone != host {
			t.alone, t.dirty = host, true
		}
	}
}

func (t *traffic) setAlone(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.alone != host {
		t.alone, t.dirty = host, true
	}
}

// aligned reports whether the promises, in the order made, are those of
// claims, in their order: the usual case (each claimed job was asked
// about just before it was claimed), told without parsing a URL. The
// check is that each claim's URL names its host as written, so a URL
// that spells its host otherwise takes the parsing path.
func (a *admissions) aligned(claims []*store.Claim) bool {
	if len(a.order) != len(claims) {
		return false
	}
	for i, c := range claims {
		if c == nil {
			return false
		}
		u := c.Job.Request.URL
		if c.Job.State == store.StateUnknown && c.Job.StatusURL != "" {
			u = c.Job.StatusURL
		}
		if !urlHostIs(u, a.order[i]) {
			return false
		}
	}
	return true
}

// take counts a send to host admit was not asked about.
func (t *traffic) take(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	h := t.host(host, now)
	h.inflight++
	h.sends++
	h.recent.add(now, figSend)
	t.dirty = true
}

// observeSend tells traffic what an attempt's send showed of its host and
// reports whether the host pushed back (429 or 503 with Retry-After).
func (r *Runner) observeSend(ctx context.Context, host string, res sendResult, notSent bool) bool {
	var ra time.Duration
	pushBack := false
	if (res.status == 429 || res.status == 503) && res.header != nil {
		ra, pushBack = ParseRetryAfter(res.header.Values("Retry-After"), res.end)
	}
	o := outcomeAnswered
	switch {
	case notSent || (res.status == 0 && ctx.Err() != nil):
		o = outcomeNotJudged
	case pushBack:
		o = outcomePushBack
	case res.status == 0:
		o = outcomeFailed
	}
	r.traffic.observe(host, o, res.status, min(ra, r.cfg.RetryAfterCap))
	return pushBack
}

// observeQuery tells traffic what a status query showed of its host.
func (r *Runner) observeQuery(ctx context.Context, host string, ans statusquery.Answer, notSent bool) {
	o := outcomeAnswered
	switch {
	case notSent || (ans.HTTPStatus == 0 && (ans.Err == nil || ctx.Err() != nil)):
		o = outcomeNotJudged
	case ans.HTTPStatus == 0:
		o = outcomeFailed
	}
	r.traffic.queried(host)
	r.traffic.observe(host, o, ans.HTTPStatus, 0)
}

// urlHostIs reports whether raw's authority is host exactly as written.
func urlHostIs(raw, host string) bool {
	i := strings.Index(raw, "://")
	if i < 0 || host == "" {
		return false
	}
	rest, ok := strings.CutPrefix(raw[i+3:], host)
	return ok && (rest == "" || rest[0] == '/' || rest[0] == '?' || rest[0] == '#')
}
