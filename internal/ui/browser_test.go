package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// EnvScreenshots names the directory the browser tests save their
// screenshots in (a temporary one when unset).
const EnvScreenshots = "IDEMRUN_UI_SCREENSHOTS"

// EnvChromium names the browser the tests drive; /usr/bin/chromium (the
// Debian package) when unset.
const EnvChromium = "IDEMRUN_CHROMIUM"

// browser is a headless Chromium with one tab.
type browser struct {
	t      *testing.T
	ctx    context.Context
	shots  string
	prefix string

	mu      sync.Mutex
	dialogs []string // messages of the dialogs accepted (confirmations)
}

// chromium returns the browser's path; without one the test fails in CI
// and skips elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	p := os.Getenv(EnvChromium)
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		if pgtest.InCI() {
			t.Fatalf("no Chromium at %s (%v), and CI=true does not allow skipping: install Debian's chromium package (.ci/run does) or set %s", p, err, EnvChromium)
		}
		t.Skipf("no Chromium at %s (%v): install Debian's chromium package or set %s", p, err, EnvChromium)
	}
	return p
}

func newBrowser(t *testing.T, prefix string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	shots := os.Getenv(EnvScreenshots)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, shots: shots, prefix: prefix}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	return b
}

// do runs steps, each batch within 20 seconds.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("browser (at %s): %v", loc, err)
	}
}

// eval evaluates a JavaScript expression into a T.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true, across the
// navigations that may come first (an evaluation they cut short is tried
// again).
func (b *browser) waitJS(js string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.t.Fatalf("waiting for %s (at %s): not true after 15 s (last error %v)", js, loc, last)
}

// open navigates to the dashboard path and waits for the page.
func (b *browser) open(base, path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base + path))
	b.waitJS(`document.readyState === "complete"`)
}

// shot saves a full-page screenshot as PREFIX-NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	// A page just loaded may not be laid out yet on a loaded machine
	// (the browser then refuses a screenshot of 0 width): try again.
	var png []byte
	var err error
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, b.prefix+"-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// cookie returns the browser's cookie of this name for the dashboard.
func (b *browser) cookie(base, name string) *network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/"}})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c
		}
	}
	b.t.Fatalf("no cookie %s among %d", name, len(res.Cookies))
	return nil
}

func (b *browser) confirmations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// checkPage checks what every page must be: every control labelled,
// nothing wider than the viewport, only the dashboard's own script, and
// no script of a job's text run (it would retitle the page).
func (b *browser) checkPage(what string) {
	b.t.Helper()
	unlabelled := eval[[]string](b, `[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
		.filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !(e.tagName === 'BUTTON' && e.textContent.trim()))
		.map(e => e.outerHTML)`)
	if len(unlabelled) > 0 {
		b.t.Errorf("%s: controls without a label: %v", what, unlabelled)
	}
	if over := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
		b.t.Errorf("%s: the page is %d px wider than the viewport", what, over)
	}
	if n := eval[int](b, `document.querySelectorAll('script').length`); n > 1 {
		b.t.Errorf("%s: %d script elements, want the dashboard's one", what, n)
	}
	if title := eval[string](b, `document.title`); strings.Contains(title, "pwned") {
		b.t.Errorf("%s: a job's text ran as script (title %q)", what, title)
	}
}

// text is the visible text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// clickAway clicks the element matching sel when the click navigates
// away (a link, a submit button): the click is left to the page, as a
// protocol click that outlives its page reports an error.
func (b *browser) clickAway(sel string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; setTimeout(() => e.click(), 0); return true })()`, sel)
	if !eval[bool](b, js) {
		b.t.Fatalf("nothing to click at %s", sel)
	}
}
