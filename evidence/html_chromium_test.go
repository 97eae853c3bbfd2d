package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/verdict"
)

// firstScreen is run in the page after the report: it records what a person
// sees on the first screen, and what the verdict filter does.
const firstScreen = `<script>
(function () {
  var seen = function (el) { if (!el) return false; var r = el.getBoundingClientRect(); return r.height > 0 && r.top < window.innerHeight; };
  var out = {
    title: document.title,
    banner: (document.querySelector('#banner') || {}).textContent || '',
    bannerOnFirstScreen: seen(document.querySelector('#banner .headline')),
    failShare: (function () { var s = document.querySelector('.bar .s-executed-fail'); return s ? s.getBoundingClientRect().width : 0; })(),
    rootsOnFirstScreen: seen(document.querySelector('.roots')),
    failOnFirstScreen: seen(document.querySelector('tr.r-executed-fail')),
    blockedOnFirstScreen: seen(document.querySelector('tr.r-blocked')),
    agtpRows: document.querySelectorAll('tr[id^="agtp."]').length,
    agtpCollapsed: !!document.querySelector('h2.collapsed#agtp'),
    exchangeShown: !!document.querySelector('tr.r-executed-fail details.exchange')
  };
  var box = document.querySelector('#filter input[value="executed-pass"]');
  box.checked = false; box.dispatchEvent(new Event('change'));
  var passes = document.querySelectorAll('tr.r-executed-pass'), hidden = 0;
  passes.forEach(function (r) { if (r.getBoundingClientRect().height === 0) hidden++; });
  out.passRows = passes.length; out.passHidden = hidden;
  document.body.setAttribute('data-check', JSON.stringify(out));
})();
</script>`

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipped: no headless Chromium on this machine (looked for chromium, chromium-browser, google-chrome on PATH); install Debian's chromium (apt-get install chromium), as .ci/run does, to run this check")
	return ""
}

// TestAPersonSeesTheRootCauseFirst renders a report of passes, a failure,
// the requirements it blocked and a family that was not selected, in
// headless Chromium at a laptop's window size: the first screen shows the
// subject, the root cause and the failure; the unselected family is one
// line; the failure shows the exchange that failed; the filter hides the
// passes; the top of the page says NOT CERTIFIED and the strip shows the
// failure's share.
func TestAPersonSeesTheRootCauseFirst(t *testing.T) {
	browser := chromium(t)
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var rows []verdict.Row
	for _, e := range reg.Entries {
		r := verdict.Row{ID: e.ID, Result: verdict.ExecutedPass, Assertions: 3}
		switch {
		case e.Family == "agtp":
			r = verdict.Row{ID: e.ID, Result: verdict.Skipped, Detail: "its profile is not certified in this run"}
		case e.ID == "contractrefine.preflight.post.outcome-closed-enum":
			r = verdict.Row{ID: e.ID, Result: verdict.ExecutedFail, Assertions: 1, Detail: "contractrefine/post_preflight.feature:37: expected status 200: POST /v1/preflight answered 403",
				Exchange: &verdict.Exchange{Method: "POST", Target: "/v1/preflight", RequestBody: `{"intent":{}}`, Status: 403, ResponseBody: `{"outcome":"deny"}`}}
		case e.ID == "contractrefine.preflight.get.returns-stored-decision", e.ID == "contractrefine.tool.enforce-bound-call-allowed":
			r = verdict.Row{ID: e.ID, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"contractrefine.preflight.post.outcome-closed-enum"}, Detail: "precondition not met"}
		}
		rows = append(rows, r)
	}
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := evidence.Statement{Subject: []evidence.Subject{{Name: "acme-host", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}},
		Predicate: evidence.Predicate{Requirements: rows, Totals: evidence.Count(rows), StartedAt: start, FinishedAt: start.Add(time.Second)}}
	var page bytes.Buffer
	if err := evidence.RenderHTML(&page, st, reg, "test"); err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(page.String(), "</body>", firstScreen+"</body>", 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+dir,
		"--window-size=1280,900", "--virtual-time-budget=2000", "--dump-dom", "file://"+path).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`data-check="([^"]*)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the page did not run its check:\n%.500s", out)
	}
	var got struct {
		Title, Banner                                      string
		BannerOnFirstScreen                                bool
		FailShare                                          float64
		RootsOnFirstScreen, FailOnFirstScreen              bool
		BlockedOnFirstScreen, AgtpCollapsed, ExchangeShown bool
		AgtpRows, PassRows, PassHidden                     int
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
		t.Fatal(err)
	}
	switch {
	case !strings.Contains(got.Title, "acme-host"):
		t.Errorf("the title %q does not name the subject", got.Title)
	case !strings.Contains(got.Banner, "NOT CERTIFIED") || !got.BannerOnFirstScreen:
		t.Errorf("the first screen of a failing run does not say NOT CERTIFIED (banner %q)", got.Banner)
	case got.FailShare <= 0:
		t.Error("the strip shows no failing share")
	case !got.RootsOnFirstScreen:
		t.Error("the root cause is not on the first screen")
	case !got.FailOnFirstScreen:
		t.Error("the failed requirement is not on the first screen")
	case !got.AgtpCollapsed || got.AgtpRows != 0:
		t.Errorf("the unselected family is not one line (%d rows)", got.AgtpRows)
	case !got.ExchangeShown:
		t.Error("the failure does not show its last exchange")
	case got.PassRows == 0 || got.PassHidden != got.PassRows:
		t.Errorf("the filter hid %d of %d passes", got.PassHidden, got.PassRows)
	}
	t.Logf("%+v", got)
}
