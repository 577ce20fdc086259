package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/ui"
	"github.com/idemrun/idemrun/store"
)

// noRedirect is an HTTP client that shows redirects instead of following
// them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}

// send makes one request to the dashboard outside the browser.
func send(t *testing.T, method, u, bearer, cookie string, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestDashboard drives the dashboard in a real browser on each backend:
// refused without the token, log in, the overview's counts and its live
// refresh, filtering to failed jobs, a job's timeline, hostile text shown
// as text, resolving a needs_attention job with a note, CSRF refusals,
// the hosts page, and the phone-sized layout.
func TestDashboard(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testDashboard(t, backend) })
	}
}

func testDashboard(t *testing.T, backend string) {
	ctx := context.Background()
	f := newFixture(t, backend)
	b := newBrowser(t, backend)

	// Without the token, a page is sent to the login form and shows no
	// job; an action is refused; a wrong bearer token is refused.
	code, hdr, body := send(t, "GET", f.url+"/ui/jobs?state=failed", "", "", nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/ui/login?next=") || strings.Contains(body, f.rejected[0]) {
		t.Fatalf("GET /ui/jobs without the token: %d, Location %q, body %q; want 303 to the login form and no job", code, hdr.Get("Location"), body)
	}
	if code, _, _ := send(t, "GET", f.url+"/ui/jobs", "not-the-token", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /ui/jobs with a wrong bearer token: %d, want 401", code)
	}
	if code, _, _ := send(t, "POST", f.url+"/ui/jobs/"+f.rejected[0]+"/retry", "", "", url.Values{"note": {"x"}}); code != http.StatusUnauthorized {
		t.Fatalf("POST retry without the token: %d, want 401", code)
	}
	code, hdr, body = send(t, "GET", f.url+"/ui/jobs?state=failed", testToken, "", nil)
	if code != http.StatusOK || !strings.Contains(body, f.rejected[0]) {
		t.Fatalf("GET /ui/jobs with the bearer token: %d; want 200 with the failed jobs", code)
	}
	if csp := hdr.Get("Content-Security-Policy"); csp != ui.CSP || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("Content-Security-Policy %q; want %q, which allows only the dashboard's own script", csp, ui.CSP)
	}
	f.expectStates(t, map[store.State][]string{store.StateFailed: f.rejected})

	// Log in: a wrong token is refused on the form, the right one leads
	// to the page first asked for.
	b.open(f.url, "/ui/")
	b.waitJS(`location.pathname === "/ui/login"`)
	b.checkPage("login")
	b.shot("login")
	b.do(chromedp.SendKeys(chromedp.ID("token"), "wrong-token"))
	b.clickAway(`form.login button`)
	b.waitJS(`location.search.includes("failed=1") && document.readyState === "complete"`)
	if msg := b.text(".error"); !strings.Contains(msg, "not the admin token") {
		t.Fatalf("after a wrong token the login page says %q", msg)
	}
	b.do(chromedp.SendKeys(chromedp.ID("token"), testToken))
	b.clickAway(`form.login button`)
	b.waitJS(`location.pathname === "/ui/" && document.querySelector(".counts") !== null`)
	sc := b.cookie(f.url, "idemrun_session")
	if !sc.HTTPOnly || sc.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie: HttpOnly %v, SameSite %q; want HttpOnly and Strict", sc.HTTPOnly, sc.SameSite)
	}

	// The overview's counts are the store's.
	st, err := f.c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts := func(st api.Stats) {
		t.Helper()
		shown := eval[map[string]int64](b, `Object.fromEntries([...document.querySelectorAll('.counts li')].map(li => [li.querySelector('.state').textContent, +li.querySelector('.n').textContent]))`)
		for _, s := range store.States() {
			if shown[string(s)] != st[string(s)] {
				t.Fatalf("overview shows %v, store counts %v", shown, st)
			}
		}
		if n := eval[int64](b, `+document.querySelector('.attention .big').textContent`); n != st["needs_attention"] {
			t.Fatalf("overview shows %d needing attention, store %d", n, st["needs_attention"])
		}
	}
	checkCounts(st)
	if got := eval[int](b, `document.querySelectorAll('.chart rect').length`); got == 0 {
		t.Fatalf("the chart shows no minute with finished jobs, though %d finished just now", st["succeeded"]+st["failed"]+st["canceled"])
	}
	b.checkPage("overview")
	b.shot("overview")

	// It refreshes live, without a reload and without moving anything.
	before := eval[[]float64](b, `[...document.querySelectorAll('#live section')].map(s => s.getBoundingClientRect().height)`)
	b.do(chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if _, err := f.c.Enqueue(ctx, api.Request{URL: "http://" + f.targetHost + "/ok", Body: []byte(`{}`)}, api.EnqueueOptions{RunAt: time.Now().Add(time.Hour), Deadline: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.waitJS(`document.querySelector('.counts a[href="/ui/jobs?state=pending"] .n').textContent === "2"`)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Fatal("the overview reloaded the page to refresh")
	}
	after := eval[[]float64](b, `[...document.querySelectorAll('#live section')].map(s => s.getBoundingClientRect().height)`)
	if !slices.Equal(before, after) {
		t.Fatalf("a refresh moved the overview's sections: heights %v, then %v", before, after)
	}

	// Filter to failed jobs with the form.
	b.open(f.url, "/ui/jobs")
	b.do(chromedp.Click(chromedp.CSS(`input[name=state][value=failed]`)))
	b.clickAway(`form.filters button[type=submit]`)
	b.waitJS(`location.search.includes("state=failed") && document.readyState === "complete"`)
	rows := eval[[][]string](b, `[...document.querySelectorAll('table.jobs tbody tr')].map(tr => [tr.cells[0].innerText, tr.cells[1].innerText])`)
	var ids []string
	for _, r := range rows {
		if r[1] != "failed" {
			t.Fatalf("the failed filter lists a %s job: %v", r[1], rows)
		}
		ids = append(ids, r[0])
	}
	failed := sorted(append([]string{f.otherFailed}, f.rejected...))
	if slices.Sort(ids); !slices.Equal(ids, failed) {
		t.Fatalf("the failed filter lists %v, want %v", ids, failed)
	}
	b.checkPage("jobs")
	b.shot("jobs-failed")

	// The other filters, as query parameters: host, id prefix, time
	// range, sort; a bad one is refused naming it.
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"state=failed&host=" + url.QueryEscape(f.targetHost), sorted(f.rejected)},
		{"state=failed&id_prefix=" + f.hostile[:len(f.hostile)-4], []string{f.hostile}},
		{"state=failed&since=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil},
		{"state=failed&until=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")) + "&sort=updated", failed},
		{"state=pending&sort=next_run", []string{f.later}},
	} {
		code, _, body := send(t, "GET", f.url+"/ui/jobs?"+c.query, testToken, "", nil)
		if code != http.StatusOK {
			t.Fatalf("/ui/jobs?%s: %d", c.query, code)
		}
		var got []string
		for _, id := range append(append(append([]string{f.otherFailed, f.later}, f.rejected...), f.ok...), f.attention...) {
			if strings.Contains(body, `href="/ui/jobs/`+id+`"`) {
				got = append(got, id)
			}
		}
		if slices.Sort(got); !slices.Equal(got, sorted(c.want)) {
			t.Fatalf("/ui/jobs?%s lists %v, want %v", c.query, got, sorted(c.want))
		}
	}
	for q, field := range map[string]string{"since=yesterday": "since", "state=failed&sort=next_run": "sort", "state=bogus": "state", "host=a%20b": "host", "limit=0": "limit"} {
		code, _, body := send(t, "GET", f.url+"/ui/jobs?"+q, testToken, "", nil)
		if code != http.StatusBadRequest || !strings.Contains(body, "invalid "+field) {
			t.Errorf("/ui/jobs?%s: %d; want 400 naming %s in:\n%s", q, code, field, body[strings.Index(body, "<main"):])
		}
	}

	// Open a job from the list: its timeline shows the attempt.
	b.clickAway(`table.jobs tbody tr a`)
	b.waitJS(`location.pathname.startsWith("/ui/jobs/") && document.querySelector("table.timeline") !== null`)
	steps := eval[[][]string](b, `[...document.querySelectorAll('table.timeline tbody tr')].map(tr => [...tr.cells].map(c => c.innerText))`)
	if len(steps) == 0 || steps[0][1] != "attempt 1" || !strings.Contains(steps[0][3], "400") {
		t.Fatalf("timeline of a rejected job: %v; want attempt 1 answered 400", steps)
	}

	// A job whose body, headers, key, URL and last answer hold markup
	// shows it as text, and its secret header redacted.
	b.open(f.url, "/ui/jobs/"+f.hostile)
	b.checkPage("hostile job")
	if n := eval[int](b, `document.querySelectorAll('main img').length`); n != 0 {
		t.Fatalf("the hostile job's page has %d img elements", n)
	}
	shown := b.text("main")
	for _, want := range []string{hostileHeader, hostileAnswer, "<script>document.title='pwned-body'</script>", "<script>key</script>", "Bearer REDACTED"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the hostile job's page does not show %q as text", want)
		}
	}
	if html := eval[string](b, `document.documentElement.outerHTML`); strings.Contains(html, "sk_live_do_not_show_me") {
		t.Error("the page holds the job's Authorization header value")
	}
	b.shot("job-hostile")
	b.open(f.url, "/ui/jobs/"+f.ok[0])
	b.checkPage("succeeded job")
	b.shot("job-succeeded")

	// Resolve a needs_attention job in place, with a note.
	b.open(f.url, "/ui/attention")
	b.checkPage("attention")
	b.shot("attention")
	id := f.attention[0]
	form := `article[aria-labelledby="h-` + id + `"] `
	note := "checked the ledger: pay_1 exists <b>once</b>"
	b.do(chromedp.Click(chromedp.CSS(form+`input[value=succeeded]`)),
		chromedp.SendKeys(chromedp.CSS(form+`textarea`), note))
	b.clickAway(form + `button[type=submit]`)
	b.waitJS(`location.search.includes("done=resolve") && document.readyState === "complete"`)
	j, err := f.c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	last := j.History[len(j.History)-1]
	if j.State != store.StateSucceeded || last.Kind != store.EventManual || last.Note != note || !strings.HasPrefix(last.Actor, "dashboard@127.0.0.1") {
		t.Fatalf("after resolving in the browser: state %s, last event %+v", j.State, last)
	}
	if c := b.confirmations(); len(c) == 0 || !strings.Contains(c[len(c)-1], "Resolve this job?") {
		t.Fatalf("resolve was not confirmed first: dialogs %q", c)
	}
	if strings.Contains(b.text("main"), f.attention[0]+"\n") {
		t.Fatal("the resolved job is still in the queue")
	}

	// An action with the session cookie but without its CSRF token (or
	// with a wrong one) is refused and changes nothing.
	cookie := "idemrun_session=" + sc.Value
	for _, csrf := range []string{"", "0123456789abcdef"} {
		form := url.Values{"as": {"failed"}, "note": {"forged"}}
		if csrf != "" {
			form.Set("csrf", csrf)
		}
		if code, _, body := send(t, "POST", f.url+"/ui/jobs/"+f.attention[1]+"/resolve", "", cookie, form); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("resolve with csrf %q: %d %q; want 403 naming the CSRF token", csrf, code, body)
		}
	}
	f.expectStates(t, map[store.State][]string{store.StateNeedsAttention: f.attention[1:]})

	// Bulk retry, from the failed list: count first, then confirm;
	// exactly the failed jobs at the target's host change.
	testBulkRetry(t, f, b)

	b.open(f.url, "/ui/hosts")
	b.checkPage("hosts")
	if hosts := b.text("main table"); !strings.Contains(hosts, f.targetHost) {
		t.Fatalf("the hosts page does not list the target %s: %q", f.targetHost, hosts)
	}
	b.shot("hosts")

	// Keyboard: the first Tab reaches the skip link.
	b.open(f.url, "/ui/")
	b.do(chromedp.KeyEvent("\t"))
	if cls := eval[string](b, `document.activeElement.className`); cls != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", cls)
	}

	// A phone-sized viewport.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	for _, p := range []struct{ name, path string }{{"phone-overview", "/ui/"}, {"phone-job", "/ui/jobs/" + f.hostile}, {"phone-attention", "/ui/attention"}} {
		b.open(f.url, p.path)
		b.checkPage(p.name)
		b.shot(p.name)
	}
	b.do(chromedp.EmulateViewport(1280, 800))
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// testBulkRetry retries the failed jobs of one host from the bulk page:
// the count comes first and changes nothing; the confirmation changes
// exactly the jobs counted, each with the note, and nothing else.
func testBulkRetry(t *testing.T, f *fixture, b *browser) {
	ctx := context.Background()
	before := map[string]*api.Job{}
	all, err := f.c.List(ctx, api.ListFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all.Jobs {
		before[j.ID] = j
	}
	b.open(f.url, "/ui/jobs?state=failed")
	b.clickAway(`a[href^="/ui/bulk?"]`)
	b.waitJS(`location.pathname === "/ui/bulk" && document.readyState === "complete"`)
	if !eval[bool](b, `document.querySelector('input[name=action][value=retry]').checked`) {
		t.Fatal("the bulk page from the failed list does not have retry picked")
	}
	note := "target fixed the 400s; retrying"
	b.do(chromedp.SendKeys(chromedp.CSS(`form.bulk input[name=host]`), f.targetHost),
		chromedp.SendKeys(chromedp.ID("bulk-note"), note))
	b.checkPage("bulk")
	b.shot("bulk")
	b.clickAway(`form.bulk button[type=submit]`)
	b.waitJS(`document.getElementById("matched") !== null && document.readyState === "complete"`)
	if n := eval[int](b, `+document.getElementById("matched").textContent`); n != len(f.rejected) {
		t.Fatalf("the count shows %d jobs, want the %d failed at %s", n, len(f.rejected), f.targetHost)
	}
	f.expectStates(t, map[store.State][]string{store.StateFailed: append([]string{f.otherFailed}, f.rejected...)})
	b.checkPage("bulk count")
	b.shot("bulk-count")
	b.clickAway(`form.confirm button[type=submit]`)
	b.waitJS(`document.getElementById("changed") !== null && document.readyState === "complete"`)
	if n := eval[int](b, `+document.getElementById("changed").textContent`); n != len(f.rejected) {
		t.Fatalf("the bulk retry reports %d changed, want %d", n, len(f.rejected))
	}
	if c := b.confirmations(); len(c) == 0 || !strings.Contains(c[len(c)-1], "retry every failed job") {
		t.Fatalf("the bulk retry was not confirmed first: dialogs %q", c)
	}
	b.shot("bulk-done")
	after, err := f.c.List(ctx, api.ListFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range after.Jobs {
		old := before[j.ID]
		if slices.Contains(f.rejected, j.ID) {
			full, err := f.c.Get(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			last := full.History[len(full.History)-1]
			if j.State != store.StatePending || last.Kind != store.EventManual || last.Note != note {
				t.Fatalf("bulk-retried job %s: state %s, last event %+v", j.ID, j.State, last)
			}
			continue
		}
		if old == nil || old.State != j.State || !old.UpdatedAt.Equal(j.UpdatedAt) {
			t.Fatalf("job %s changed in the bulk retry of other jobs: %+v then %+v", j.ID, old, j)
		}
	}
}
