package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// knownFailures are the corpus forms whose account is wrong today (a write
// the account misses, or a wrong table), by form name, with what goes
// wrong. Their checks run and are logged, and do not fail the test; a
// form listed here that passes is logged too, to be taken off the list.
var knownFailures = map[string]string{}

// formResult is what a form's requests did and what the checks found.
type formResult struct {
	problems []string
	stale    int // requests after which a read missed the changes
	effect   int // requests whose effect the account lacks
	warm     int // requests sent with kv answered from memory just before
	written  []string
	refused  bool // a request ended in one of the form's accepted errors
}

// runForm runs a form's requests in order on a new session of the writer
// and checks each one.
func (e *effectsEnv) runForm(t *testing.T, f effectForm) formResult {
	t.Helper()
	conn, st := e.newSession(t)
	defer conn.Close()
	fn := e.formNames()
	narrow := !f.writesKV() && !f.conservative
	var r formResult
	var sa sessionAccount
	for i, req := range f.requests {
		if e.prepare(t, fmt.Sprintf("%s (request %d)", f.name, i+1), i == 0) {
			r.warm++
		}
		text := e.x.expand(req, fn)
		out := e.requestRun(t, conn, st, &sa, text, narrow, f.indirect)
		if len(f.requests) > 1 {
			st.DB = currentDB(t, conn)
		}
		where := ""
		if len(f.requests) > 1 {
			where = fmt.Sprintf("request %d: ", i+1)
		}
		if out.err != nil {
			if slices.Contains(f.errors, mysqlErrNumber(out.err)) {
				r.refused = true
			} else {
				r.problems = append(r.problems, fmt.Sprintf("%sfailed: %v\n  request: %s", where, out.err, text))
			}
		}
		for _, s := range out.stale {
			r.problems = append(r.problems, where+"stale: "+s)
		}
		for _, s := range out.mismatch {
			r.problems = append(r.problems, where+"effect: "+s)
		}
		for _, s := range out.wide {
			r.problems = append(r.problems, where+"narrow: "+s+" though the form does not write kv")
		}
		if len(out.stale) > 0 {
			r.stale++
		}
		if len(out.mismatch) > 0 || len(out.wide) > 0 {
			r.effect++
		}
		for _, w := range out.written {
			if !slices.Contains(r.written, w) {
				r.written = append(r.written, w)
			}
		}
	}
	slices.Sort(r.written)
	declared := slices.Clone(f.writes)
	slices.Sort(declared)
	declared = slices.Compact(declared)
	if !r.refused && !slices.Equal(declared, r.written) {
		r.problems = append(r.problems, fmt.Sprintf("corpus: the form says it writes %v, the binary log shows %v", declared, r.written))
	}
	return r
}

// TestEffectsCorpus runs every form of testdata/effects through the proxy,
// one at a time, with kv answered from memory before each request. After
// each request the next read of kv sees what the backend has, and the
// account of the request (plugins' own, for the backend's version, with
// the session's prepared statements) names every table the backend's
// binary log shows it changed; a form that does not write kv leaves kv out
// of its account.
//
// TABLEPROXY_EFFECTS_FORMS (a regular expression on the forms' names)
// runs some of them; TABLEPROXY_EFFECTS_DEBUG logs the statements of the
// binary log that the test's own reading does not know.
func TestEffectsCorpus(t *testing.T) {
	forms := loadForms(t, filepath.Join("testdata", "effects"))
	if len(forms) < 150 {
		t.Fatalf("%d forms in testdata/effects, want at least 150", len(forms))
	}
	if only := os.Getenv("TABLEPROXY_EFFECTS_FORMS"); only != "" {
		// A subset, to look into some forms (a regular expression on
		// their names).
		re, err := regexp.Compile(only)
		if err != nil {
			t.Fatalf("TABLEPROXY_EFFECTS_FORMS: %v", err)
		}
		forms = slices.DeleteFunc(forms, func(f effectForm) bool { return !re.MatchString(f.name) })
	}
	e := newEffectsEnv(t)
	start := time.Now()
	hits0 := hitsOf(t, e.adminDB, "kv")
	var requests, warm, stale, effect, known, refused int
	for _, f := range forms {
		r := e.runForm(t, f)
		requests += len(f.requests)
		warm += r.warm
		if r.refused {
			refused++
		}
		why, isKnown := knownFailures[f.name]
		switch {
		case isKnown && len(r.problems) > 0:
			known++
			t.Logf("known failure %s (%s):\n  %s", f.name, why, strings.Join(r.problems, "\n  "))
		case isKnown:
			t.Logf("known failure %s passes now: take it off knownFailures", f.name)
		case len(r.problems) > 0:
			stale += r.stale
			effect += r.effect
			t.Errorf("%s:\n  %s\n  form: %s", f.name, strings.Join(r.problems, "\n  "), strings.Join(f.requests, "\n  --@ next\n  "))
		}
	}
	hits := hitsOf(t, e.adminDB, "kv") - hits0
	t.Logf("%d forms, %d requests in %v: %d sent with kv answered from memory just before; %d reads of kv from memory; "+
		"%d forms ended in an error they accept; %d requests with a stale read, %d whose account misses an effect (or, for a form that does not write kv, names kv), %d known failures",
		len(forms), requests, time.Since(start).Round(time.Millisecond), warm, hits, refused, stale, effect, known)
	if hits == 0 || warm == 0 {
		t.Error("no read of kv was answered from memory: the corpus did not exercise the cache")
	}
}
