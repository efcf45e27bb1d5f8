package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The corpus of request forms (testdata/effects/NNN-name.sql). A file
// holds one form: directives on lines that start with "--@", then the
// request's text; a form of several requests (on one connection, in
// order) has a line "--@ next" between them. The request text is sent as
// it is, after its placeholders are replaced:
//
//	{{db}} {{db2}}        the test's database and a second one
//	{{kv}}                the cached table (id INT PRIMARY KEY, v BIGINT NOT NULL)
//	{{other}}             an uncached table of the same shape
//	{{log}}               uncached (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(64))
//	{{seq}}               a sequence (CACHE 0: every NEXTVAL writes it)
//	{{trig}}              uncached; its INSERT and UPDATE triggers write kv (row 2)
//	{{trigo}}             uncached; its INSERT trigger writes other (row 2)
//	{{kvview}}            an updatable view of kv
//	{{vers}}              uncached, WITH SYSTEM VERSIONING
//	{{new}} {{new2}}      table names of the form's own (nt_...), new to the database
//	{{prog}}              a stored program name of the form's own
//	{{user}} {{role}}     a throwaway user ('name'@'localhost') and a role granted to it and to the writer
//	{{newuser}} {{newuser2}} {{newrole}} users and a role of the form's own, dropped after the test
//	{{n}} {{n2}}          numbers new to every request (the values it writes)
//
// Stored programs made once for every form: p_kv(x) and p_other(x)
// (UPDATE kv / other SET v = x WHERE id = 1), p_read() (reads kv),
// f_kv(x) and f_other(x) (the same as functions returning x), f_pure(x)
// (x + 1, no SQL).
//
// Directives:
//
//	--@ writes: kv other   the tables whose rows or definition the form changes
//	                       (placeholder names; "new" for {{new}}, "db2.t" in {{db2}});
//	                       the binary log must show exactly these
//	--@ errors: 8242       error numbers the form may end with instead of success
//	--@ conservative       the account may be wider than the form: kv written, or
//	                       unknown, though the form does not write kv
//	--@ indirect: kv       tables written through a trigger or a view: the account
//	                       names the table written, and the cache looks up what
//	                       writes through it reach (cache/indirect.go)
//	--@ piece              one statement the generator may compose with others,
//	                       and run again and again
//	--@ note: ...          a remark
type effectForm struct {
	name         string
	requests     []string
	writes       []string
	errors       []uint16
	conservative bool
	indirect     []string
	piece        bool
}

// placeholders are the names a form's text may hold in {{ }}.
var placeholders = map[string]bool{"db": true, "db2": true, "kv": true, "other": true, "log": true, "seq": true,
	"trig": true, "trigo": true, "kvview": true, "vers": true, "new": true, "new2": true, "prog": true, "user": true,
	"role": true, "newuser": true, "newuser2": true, "newrole": true, "n": true, "n2": true}

// loadForms reads every form of dir, in file-name order.
func loadForms(t *testing.T, dir string) []effectForm {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var forms []effectForm
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseForm(strings.TrimSuffix(filepath.Base(p), ".sql"), string(b))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		forms = append(forms, f)
	}
	return forms
}

func parseForm(name, text string) (effectForm, error) {
	f := effectForm{name: name}
	var cur []string
	flush := func() {
		req := strings.Join(cur, "\n")
		req = strings.TrimRight(req, "\n")
		if strings.TrimSpace(req) != "" {
			f.requests = append(f.requests, req)
		}
		cur = nil
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "--@") {
			cur = append(cur, line)
			continue
		}
		key, val, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "--@")), ":")
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "next":
			flush()
		case "writes":
			f.writes = append(f.writes, strings.Fields(val)...)
		case "errors":
			for _, s := range strings.Fields(val) {
				n, err := strconv.ParseUint(s, 10, 16)
				if err != nil {
					return f, fmt.Errorf("errors: %v", err)
				}
				f.errors = append(f.errors, uint16(n))
			}
		case "conservative":
			f.conservative = true
		case "indirect":
			f.indirect = append(f.indirect, strings.Fields(val)...)
		case "piece":
			f.piece = true
		case "note":
		default:
			return f, fmt.Errorf("unknown directive %q", line)
		}
	}
	flush()
	if len(f.requests) == 0 {
		return f, fmt.Errorf("no request")
	}
	for _, req := range f.requests {
		for rest := req; ; {
			i := strings.Index(rest, "{{")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], "}}")
			if j < 0 {
				return f, fmt.Errorf("an unclosed placeholder in %q", req)
			}
			if !placeholders[rest[i+2:i+j]] {
				return f, fmt.Errorf("unknown placeholder %s", rest[i:i+j+2])
			}
			rest = rest[i+j+2:]
		}
	}
	if f.piece && (len(f.requests) != 1 || strings.Contains(f.requests[0], ";")) {
		return f, fmt.Errorf("a piece is one statement of one request")
	}
	return f, nil
}

func (f effectForm) writesKV() bool {
	for _, w := range f.writes {
		if w == "kv" {
			return true
		}
	}
	return false
}

// formNames are the per-form names that placeholders stand for.
type formNames struct {
	new, new2, prog, newuser, newuser2, newrole string
}

// expander replaces a form's placeholders.
type expander struct {
	fixed map[string]string // the same for every form
	next  func() int64      // a number new to the run
	names func() formNames  // names new to the run
}

// expand replaces the placeholders of one request of a form.
func (x *expander) expand(text string, fn formNames) string {
	var b strings.Builder
	n, n2 := "", ""
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			b.WriteString(text)
			return b.String()
		}
		key := text[i+2 : i+j]
		b.WriteString(text[:i])
		text = text[i+j+2:]
		switch key {
		case "n":
			if n == "" {
				n = strconv.FormatInt(x.next(), 10)
			}
			b.WriteString(n)
		case "n2":
			if n2 == "" {
				n2 = strconv.FormatInt(x.next(), 10)
			}
			b.WriteString(n2)
		case "new":
			b.WriteString(fn.new)
		case "new2":
			b.WriteString(fn.new2)
		case "prog":
			b.WriteString(fn.prog)
		case "newuser":
			b.WriteString(fn.newuser)
		case "newuser2":
			b.WriteString(fn.newuser2)
		case "newrole":
			b.WriteString(fn.newrole)
		default:
			b.WriteString(x.fixed[key]) // (parseForm checked the name)
		}
	}
}
