// Command checkdocs checks the repository's Markdown: every relative link
// in README.md, docs/*.md, BENCHMARKS.md, bench/results/*.md and each
// package's README.md must
// name a file or directory that exists, and every #anchor a heading of the
// target file (GitHub's slug rules) or an HTML id/name in it. It also checks
// that the commands README.md's "Quick start" names exist and are
// executable. It prints each broken link and exits 1 if there is one.
//
// Usage (from the repository root, as scripts/test.sh runs it):
//
//	go run ./scripts/checkdocs [-root DIR] [-skip FILE,...]
//
// No network: links with a scheme (https:, mailto:) are not checked.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// prune are directories never searched for README.md files.
var prune = map[string]bool{".git": true, ".run": true, "node_modules": true, "testdata": true, "vendor": true, "bin": true}

var (
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
	codeRE    = regexp.MustCompile("`+[^`]*`+")
	linkRE    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	headingRE = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRE  = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)="([^"]+)"`)
	inlineRE  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	tagRE     = regexp.MustCompile(`<[^>]+>`)
	schemeRE  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

func main() {
	root := flag.String("root", ".", "repository root")
	skip := flag.String("skip", "", "comma-separated files (relative to the root) not to check")
	flag.Parse()
	if err := os.Chdir(*root); err != nil {
		fmt.Fprintln(os.Stderr, "checkdocs:", err)
		os.Exit(2)
	}
	files, err := markdownFiles(strings.Split(*skip, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkdocs:", err)
		os.Exit(2)
	}
	var broken []string
	anchors := map[string]map[string]bool{}
	links := 0
	for _, f := range files {
		ls, err := linksOf(f)
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		for _, l := range ls {
			links++
			if msg := check(f, l.target, anchors); msg != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", f, l.line, l.target, msg))
			}
		}
	}
	broken = append(broken, checkQuickStart("README.md")...)
	if len(broken) > 0 {
		fmt.Printf("checkdocs: %d broken link(s) or command(s):\n", len(broken))
		for _, b := range broken {
			fmt.Println("  " + b)
		}
		os.Exit(1)
	}
	fmt.Printf("checkdocs: %d files, %d relative links, all resolve\n", len(files), links)
}

// markdownFiles lists README.md, BENCHMARKS.md, docs/*.md,
// bench/results/*.md and every README.md below the root, less those in
// skip.
func markdownFiles(skip []string) ([]string, error) {
	set := map[string]bool{}
	for _, f := range []string{"README.md", "BENCHMARKS.md"} {
		if _, err := os.Stat(f); err == nil {
			set[f] = true
		}
	}
	for _, g := range []string{"docs/*.md", "bench/results/*.md"} {
		ms, _ := filepath.Glob(g)
		for _, f := range ms {
			set[f] = true
		}
	}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (prune[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "README.md" {
			set[p] = true
		}
		return nil
	})
	for _, s := range skip {
		delete(set, filepath.Clean(strings.TrimSpace(s)))
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, err
}

type link struct {
	line   int
	target string
}

// linksOf returns the link targets of file f outside code.
func linksOf(f string) ([]link, error) {
	lines, err := readLines(f)
	if err != nil {
		return nil, err
	}
	var out []link
	inFence := false
	for i, s := range lines {
		if fenceRE.MatchString(s) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		s = codeRE.ReplaceAllString(s, "")
		for _, m := range linkRE.FindAllStringSubmatch(s, -1) {
			out = append(out, link{i + 1, m[1]})
		}
		if m := refDefRE.FindStringSubmatch(s); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out, nil
}

// check says what is wrong with target, linked from file from ("" if nothing).
func check(from, target string, anchors map[string]map[string]bool) string {
	if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		if strings.HasPrefix(path, "/") {
			file = strings.TrimPrefix(path, "/")
		} else {
			file = filepath.Join(filepath.Dir(from), path)
		}
		st, err := os.Stat(file)
		if err != nil {
			return "no such file or directory"
		}
		if st.IsDir() {
			if frag != "" {
				return "anchor on a directory"
			}
			return ""
		}
	}
	if frag == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	as, ok := anchors[file]
	if !ok {
		var err error
		if as, err = anchorsOf(file); err != nil {
			return err.Error()
		}
		anchors[file] = as
	}
	if !as[strings.ToLower(frag)] {
		return fmt.Sprintf("no heading with anchor #%s in %s", frag, file)
	}
	return ""
}

// anchorsOf returns the anchors GitHub makes for f's headings, and the
// ids and names of its HTML elements.
func anchorsOf(f string) (map[string]bool, error) {
	lines, err := readLines(f)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, s := range lines {
		if fenceRE.MatchString(s) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(s, -1) {
			out[strings.ToLower(m[1])] = true
		}
		m := headingRE.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		slug := Slug(m[2])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out, nil
}

// Slug is GitHub's anchor for a heading's text: the text as rendered
// (links by their text, no tags, no code marks), lower-cased, with every
// character other than a letter, digit, space, '-' or '_' removed and
// each space made a '-'.
func Slug(h string) string {
	h = inlineRE.ReplaceAllString(h, "$1")
	h = tagRE.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkQuickStart checks that each command the first code block under
// README's "Quick start" heading runs from the repository is executable.
func checkQuickStart(readme string) []string {
	lines, err := readLines(readme)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", readme, err)}
	}
	start := slices.IndexFunc(lines, func(s string) bool {
		m := headingRE.FindStringSubmatch(s)
		return m != nil && strings.EqualFold(m[2], "Quick start")
	})
	if start < 0 {
		return []string{readme + `: no "Quick start" heading`}
	}
	var out []string
	inFence, n := false, 0
	for i := start + 1; i < len(lines); i++ {
		s := lines[i]
		if fenceRE.MatchString(s) {
			if inFence {
				break
			}
			inFence = true
			continue
		}
		if !inFence {
			if headingRE.MatchString(s) {
				break
			}
			continue
		}
		fields := strings.Fields(s)
		if len(fields) == 0 || !strings.Contains(fields[0], "/") {
			continue
		}
		n++
		st, err := os.Stat(fields[0])
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s:%d: quick start names %s, which does not exist", readme, i+1, fields[0]))
		case st.IsDir() || st.Mode().Perm()&0o111 == 0:
			out = append(out, fmt.Sprintf("%s:%d: quick start names %s, which is not executable", readme, i+1, fields[0]))
		}
	}
	if n == 0 && len(out) == 0 {
		out = append(out, readme+`: the "Quick start" section has no command to check`)
	}
	return out
}

func readLines(f string) ([]string, error) {
	fh, err := os.Open(f)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}
