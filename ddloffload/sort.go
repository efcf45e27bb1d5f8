package ddloffload

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
)

// The external sort checks each new UNIQUE index before the job goes on:
// while the copy runs, every copied row's (index key, primary key) goes
// into a sorter per index; what does not fit in tableproxy_ddl_sort_memory
// is sorted and spilled to a run file in tableproxy_ddl_temp_dir; the sort
// stage merges the runs (a k-way merge) and finds equal keys.
//
// Keys compare as the index compares them: the backend renders each key
// part as bytes that are equal exactly when the values are, in the
// column's collation (WEIGHT_STRING of the value, trailing spaces removed
// for PAD SPACE collations; integers, ENUM and SET by number; binary
// strings by their bytes), so the sort needs no collation of its own, and
// equal keys end up side by side. A row with a NULL in the key is left
// out: NULLs never conflict in a unique index.
//
// The copy reads chunks at different moments, so a value that moved from
// one row to another in between can be seen twice; each pair of equal
// keys is therefore confirmed against the table itself, with the SQL
// equality the index uses, before the job fails with 1062 naming the
// value. A duplicate created after the copy is still caught by the
// backend's own build of the index on the shadow. Either way, nothing has
// been swapped.
//
// The runs are checkpointed with the copy's watermark: a resumed job keeps
// them, and sorts what it copies anew and the keys of the ranges it kept
// above the watermark (rangelog.go), read again from the shadow. A row
// the sort sees twice that way is one row: mergeRuns counts the equal
// keys of one primary key once.

// uniquePart is how the sort reads one key part of a unique index.
type uniquePart struct {
	col    *column
	raw    string // SQL: the part's value (a prefix for a prefix part)
	weight string // SQL: its comparable bytes; "" to encode raw itself
	isInt  bool   // raw is an integer: compared by number
}

// uniqueIndex is a new UNIQUE index the job checks.
type uniqueIndex struct {
	name  string
	parts []uniquePart
}

// planUniques lists the request's unique indexes.
func (r *runner) planUniques() []uniqueIndex {
	var out []uniqueIndex
	for _, ix := range r.req.Indexes {
		if !ix.Unique {
			continue
		}
		u := uniqueIndex{name: ix.Name}
		for _, p := range ix.Parts {
			c := r.t.column(p.Column)
			expr := mysqlwire.QuoteIdent(c.Name)
			if p.Length > 0 {
				expr = fmt.Sprintf("LEFT(%s, %d)", expr, p.Length)
			}
			part := uniquePart{col: c, raw: expr}
			switch {
			case isIntType(c.DataType):
				part.isInt = true
			case c.DataType == "enum" || c.DataType == "set":
				part.weight = "(" + expr + " + 0)"
			case c.DataType == "float":
				part.raw = "CAST(" + expr + " AS DOUBLE)"
			case c.Charset != "" && strings.Contains(strings.ToLower(c.Collation), "_nopad_"):
				part.weight = "WEIGHT_STRING(" + expr + ")"
			case c.Charset != "":
				part.weight = "WEIGHT_STRING(RTRIM(" + expr + "))" // PAD SPACE: 'a' = 'a '
			}
			u.parts = append(u.parts, part)
		}
		out = append(out, u)
	}
	return out
}

// sortList is what a copy worker reads for the sort besides the row: for
// every part of every unique index, its weight (when it has one) and its
// value, then the walk key.
func (r *runner) sortList() string {
	var cols []string
	for _, u := range r.uniques {
		for _, p := range u.parts {
			if p.weight != "" {
				cols = append(cols, p.weight)
			}
			cols = append(cols, p.raw)
		}
	}
	return strings.Join(append(cols, r.t.keyList()), ", ")
}

// sortEntry is one row's key for one index.
type sortEntry struct {
	key  []byte // comparable bytes
	rest []byte // walk key, then each part's value
}

func (e sortEntry) size() int64 { return int64(len(e.key)+len(e.rest)) + 64 }

// appendPart appends b to dst, length first, so that a tuple's encoding
// is never a prefix of another's.
func appendPart(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// fieldBytes renders a value read in the text protocol as bytes.
func fieldBytes(v mysql.FieldValue) []byte {
	switch v.Type {
	case mysql.FieldValueTypeSigned:
		return strconv.AppendInt(nil, v.AsInt64(), 10)
	case mysql.FieldValueTypeUnsigned:
		return strconv.AppendUint(nil, v.AsUint64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.AppendFloat(nil, v.AsFloat64(), 'g', -1, 64)
	}
	return append([]byte{}, v.AsString()...)
}

// intKey encodes an integer so that byte order is numeric order (the
// order the backend's build meets duplicates in).
func intKey(v mysql.FieldValue) []byte {
	if v.Type == mysql.FieldValueTypeString { // YEAR may come as text
		n, _ := strconv.ParseInt(string(v.AsString()), 10, 64)
		v = mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(n), nil)
	}
	if v.Type == mysql.FieldValueTypeUnsigned {
		return binary.BigEndian.AppendUint64([]byte{1}, v.AsUint64())
	}
	n := v.AsInt64()
	if n < 0 {
		return binary.BigEndian.AppendUint64([]byte{0}, uint64(n))
	}
	return binary.BigEndian.AppendUint64([]byte{1}, uint64(n))
}

// intFromKey decodes intKey.
func intFromKey(b []byte) string {
	if len(b) != 9 {
		return ""
	}
	u := binary.BigEndian.Uint64(b[1:])
	if b[0] == 0 {
		return strconv.FormatInt(int64(u), 10)
	}
	return strconv.FormatUint(u, 10)
}

// entries turns the sort columns of one row (as sortList reads them) into
// one entry per unique index, none for an index whose key has a NULL.
func (r *runner) entries(row []mysql.FieldValue, add func(ix int, e sortEntry)) error {
	nk := len(r.t.Key)
	if len(row) < nk {
		return errors.New("sort: short row")
	}
	// Integer keys in numeric order, so that a group's rows sort in key
	// order.
	pk := r.encodeKey(row[len(row)-nk:])
	i := 0
	for ix, u := range r.uniques {
		var key, rest []byte
		rest = appendPart(rest, pk)
		null := false
		for _, p := range u.parts {
			var w mysql.FieldValue
			if p.weight != "" {
				w = row[i]
				i++
			}
			raw := row[i]
			i++
			if raw.Type == mysql.FieldValueTypeNull {
				null = true
				continue
			}
			switch {
			case p.weight != "":
				key = appendPart(key, fieldBytes(w))
			case p.isInt:
				key = appendPart(key, intKey(raw))
			default:
				key = appendPart(key, fieldBytes(raw))
			}
			rest = appendPart(rest, fieldBytes(raw))
		}
		if !null {
			add(ix, sortEntry{key, rest})
		}
	}
	return nil
}

// sorter collects one index's entries, spilling sorted runs.
type sorter struct {
	r      *runner
	ix     int
	budget int64

	mu   sync.Mutex // guards the fields below; the copy's workers add under it
	buf  []sortEntry
	size int64
	runs []string
}

// errQuota and the like are the sort's MySQL errors: the quota is the
// proxy's (a temporary-file write failure), a full disk the operating
// system's (a write error with its errno, as the backend reports it).
func errQuota(dir string, quota int64) *mysql.MyError {
	return &mysql.MyError{Code: 1878, State: "HY000", Message: fmt.Sprintf(
		"Temporary file write failure: the sort of a UNIQUE index needs more than tableproxy_ddl_disk_quota (%d bytes) in %s; raise it (SET GLOBAL) and run the statement again", quota, dir)}
}

func errWrite(path string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return mysql.NewError(mysql.ER_ERROR_ON_WRITE, fmt.Sprintf("Error writing file '%s' (errno: %d \"%s\")", path, int(errno), strerror(errno)))
	}
	return fmt.Errorf("sort: %w", err)
}

func (s *sorter) add(e []sortEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range e {
		s.buf = append(s.buf, x)
		s.size += x.size()
	}
	if s.size >= s.budget {
		return s.spillLocked()
	}
	return nil
}

func (s *sorter) spill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spillLocked()
}

func (s *sorter) runList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.runs)
}

// spillLocked sorts the buffer and writes it as a run, synced, so that a
// checkpoint can name it.
func (s *sorter) spillLocked() error {
	if len(s.buf) == 0 {
		return nil
	}
	slices.SortFunc(s.buf, func(a, b sortEntry) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return bytes.Compare(a.rest, b.rest)
	})
	var n int64
	for _, e := range s.buf {
		n += int64(len(e.key) + len(e.rest) + 2*binary.MaxVarintLen32)
	}
	r := s.r
	if used := r.sortBytes.Load(); used+n > r.set.DiskQuota {
		return errQuota(r.tempDir(), r.set.DiskQuota)
	}
	path := filepath.Join(r.tempDir(), fmt.Sprintf("u%d-%06d.run", s.ix, r.runSeq.Add(1)))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return errWrite(path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, e := range s.buf {
		if _, err = w.Write(appendPart(appendPart(nil, e.key), e.rest)); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return errWrite(path, err)
	}
	if st, err := os.Stat(path); err == nil {
		r.sortBytes.Add(st.Size())
	}
	s.runs = append(s.runs, path)
	s.buf, s.size = s.buf[:0], 0
	return nil
}

// tempDir is the job's directory in the temp dir.
func (r *runner) tempDir() string { return jobTempDir(r.set.TempDir, r.rec.job.ID) }

func jobTempDir(dir string, id int64) string { return filepath.Join(dir, fmt.Sprintf("job-%d", id)) }

// sortEntryEstimate is what one row costs the sort on disk, roughly: the
// preflight's guess of the room the sort needs.
const sortEntryEstimate = 48

// checkTempRoom refuses a job whose sort would not fit: the quota, or the
// free space of the temp dir, below its estimate; or a temp dir the proxy
// cannot write.
func (r *runner) checkTempRoom() error {
	n := 0
	for _, ix := range r.req.Indexes {
		if ix.Unique {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	need := r.t.RowsEstimate * sortEntryEstimate * int64(n)
	if need > r.set.DiskQuota {
		return errQuota(r.set.TempDir, r.set.DiskQuota)
	}
	if err := os.MkdirAll(r.set.TempDir, 0o700); err != nil {
		return errWrite(r.set.TempDir, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.set.TempDir, &st); err == nil && int64(st.Bavail)*st.Bsize < need {
		return mysql.NewError(mysql.ER_ERROR_ON_WRITE, fmt.Sprintf("Error writing file '%s' (errno: %d \"%s\"): the sort needs about %d bytes, %d are free",
			r.set.TempDir, int(syscall.ENOSPC), strerror(syscall.ENOSPC), need, int64(st.Bavail)*st.Bsize))
	}
	return nil
}

// setupSort plans the unique indexes and their sorters, and prepares the
// temp dir: a resumed job keeps the runs its checkpoint names (all there,
// or it copies again from the start); a new one starts empty.
func (r *runner) setupSort() error {
	r.uniques = r.planUniques()
	if len(r.uniques) == 0 {
		return nil
	}
	budget := max(r.set.SortMemory/int64(len(r.uniques)), 1<<20)
	r.sorters = make([]*sorter, len(r.uniques))
	for i := range r.sorters {
		r.sorters[i] = &sorter{r: r, ix: i, budget: budget}
	}
	dir := r.tempDir()
	kept := map[string]bool{}
	for _, p := range r.cp.Runs {
		if filepath.Dir(p) != dir {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			// A run is gone: the sort cannot trust the watermark.
			r.log.Warn("ddl: a sorted run of the checkpoint is gone; copying again from the start", "run", p)
			r.cp.Watermark, r.cp.Rows, r.cp.CopyDone, r.cp.Runs = nil, 0, false, nil
			r.cp.RangeEpoch, r.cp.MarkSeq = 0, 0 // and keeps no range of the log
			kept = map[string]bool{}
			break
		}
		kept[p] = true
		r.sortBytes.Add(st.Size())
	}
	for p := range kept {
		var ix int
		var seq int64
		if _, err := fmt.Sscanf(filepath.Base(p), "u%d-%d.run", &ix, &seq); err == nil && ix < len(r.sorters) {
			r.sorters[ix].runs = append(r.sorters[ix].runs, p)
			r.runSeq.Store(max(r.runSeq.Load(), seq))
		}
	}
	for _, s := range r.sorters {
		slices.Sort(s.runs)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errWrite(dir, err)
	}
	// Whatever else is there is a stopped run's unfinished spill.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return errWrite(dir, err)
	}
	for _, e := range ents {
		if p := filepath.Join(dir, e.Name()); !kept[p] {
			os.Remove(p)
		}
	}
	return nil
}

// sortBatch collects the sort entries of one range, by index.
type sortBatch [][]sortEntry

func (r *runner) newSortBatch() sortBatch { return make(sortBatch, len(r.sorters)) }

// addRow adds one row's sort columns (as sortList reads them).
func (r *runner) addRow(b sortBatch, row []mysql.FieldValue) error {
	return r.entries(row, func(ix int, e sortEntry) { b[ix] = append(b[ix], e) })
}

// addBatch hands a range's entries to the sorters; the range may be
// counted as copied only after it.
func (r *runner) addBatch(b sortBatch) error {
	for i, s := range r.sorters {
		if err := s.add(b[i]); err != nil {
			return err
		}
	}
	return nil
}

// readSortKeys reads one range's sort columns from table (the table: the
// insert_select copy's second read, as read_ahead reads them with the row;
// the shadow: a range a resumed copy kept) on c, whose results are binary.
func (r *runner) readSortKeys(c *client.Conn, table string, kr keyRange) error {
	b := r.newSortBatch()
	var res mysql.Result
	err := c.ExecuteSelectStreaming("SELECT "+r.sortList()+" FROM "+table+" WHERE "+r.t.rangeCond(kr), &res,
		func(row []mysql.FieldValue) error { return r.addRow(b, row) }, nil)
	if err != nil {
		return err
	}
	return r.addBatch(b)
}

// flushSort spills what the sorters hold, for a checkpoint: afterwards the
// runs hold every entry of every range finished so far.
func (r *runner) flushSort() ([]string, error) {
	var runs []string
	for _, s := range r.sorters {
		if err := s.spill(); err != nil {
			return nil, err
		}
		runs = append(runs, s.runList()...)
	}
	return runs, nil
}

// removeTemp deletes the job's runs: it ended, or starts its copy over.
func (r *runner) removeTemp() {
	if r.set.TempDir != "" {
		os.RemoveAll(r.tempDir())
	}
}

// sortStage merges each index's runs and fails the job on a duplicate the
// table confirms.
func (r *runner) sortStage(ctx context.Context) error {
	if len(r.sorters) == 0 {
		return nil
	}
	if err := r.stall(ctx, StageSort); err != nil {
		return err
	}
	for _, s := range r.sorters {
		if err := s.spill(); err != nil {
			return err
		}
		if err := r.mergeRuns(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// runReader reads one run.
type runReader struct {
	f   *os.File
	br  *bufio.Reader
	cur sortEntry
}

func (rr *runReader) next() (bool, error) {
	read := func() ([]byte, error) {
		n, err := binary.ReadUvarint(rr.br)
		if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		_, err = io.ReadFull(rr.br, b)
		return b, err
	}
	key, err := read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rest, err := read()
	if err != nil {
		return false, fmt.Errorf("truncated run %s: %w", rr.f.Name(), err)
	}
	rr.cur = sortEntry{key, rest}
	return true, nil
}

// runHeap orders the runs' current entries.
type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].cur.key, h[j].cur.key); c != 0 {
		return c < 0
	}
	return bytes.Compare(h[i].cur.rest, h[j].cur.rest) < 0
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Bounds on what the merge confirms of the duplicates it meets.
const (
	maxDupGroups = 1000 // groups of equal keys
	maxDupRows   = 100  // rows per group
)

// dupFound is a key the table confirms is held by two rows or more.
type dupFound struct {
	value  string // as MySQL shows it in 1062
	second []byte // the walk key of its second row in key order, encoded as in runs
}

// mergeRuns merges s's runs in key order and confirms each group of equal
// keys held by more than one row against the table. Of the duplicates
// still there, it reports the one whose second row comes first in key
// order, with the value of its first row: the duplicate a copy in key
// order meets first, which is the one the backend's own build reports.
func (r *runner) mergeRuns(ctx context.Context, s *sorter) error {
	var h runHeap
	defer func() {
		for _, rr := range h {
			rr.f.Close()
		}
	}()
	for _, p := range s.runList() {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("sort: %w", err)
		}
		rr := &runReader{f: f, br: bufio.NewReaderSize(f, 256<<10)}
		ok, err := rr.next()
		if err != nil || !ok {
			f.Close()
			if err != nil {
				return fmt.Errorf("sort: %w", err)
			}
			continue
		}
		h = append(h, rr)
	}
	heap.Init(&h)
	u := r.uniques[s.ix]
	var group []sortEntry
	var pks [][]byte
	var first *dupFound
	entries, candidates, dups := 0, 0, 0
	flush := func() error {
		if len(group) < 2 || candidates >= maxDupGroups {
			return nil
		}
		pks = pks[:0]
		for _, e := range group {
			if pk := firstPart(e.rest); len(pks) == 0 || !bytes.Equal(pks[len(pks)-1], pk) {
				pks = append(pks, pk) // sorted: a row seen twice is adjacent
			}
			if len(pks) == maxDupRows {
				break
			}
		}
		if len(pks) < 2 {
			return nil // one row copied twice (again after a resume)
		}
		if first != nil && bytes.Compare(pks[1], first.second) >= 0 {
			return nil // cannot come before the one found
		}
		candidates++
		d, err := r.stillDuplicated(u, group[0], pks)
		if err != nil || d == nil {
			return err
		}
		dups++
		if first == nil || bytes.Compare(d.second, first.second) < 0 {
			first = d
		}
		return nil
	}
	for h.Len() > 0 {
		if entries%100000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rr := h[0]
		e := rr.cur
		entries++
		if len(group) > 0 && !bytes.Equal(group[0].key, e.key) {
			if err := flush(); err != nil {
				return err
			}
			group = group[:0]
		}
		group = append(group, e)
		ok, err := rr.next()
		if err != nil {
			return fmt.Errorf("sort: %w", err)
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
			rr.f.Close()
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.log.Info("ddl: unique index checked by the sort", "index", u.name, "runs", len(s.runList()), "entries", entries,
		"candidates", candidates, "duplicates", dups)
	if first == nil {
		return nil
	}
	r.log.Info("ddl: duplicate found by the sort", "index", u.name, "value", first.value)
	return mysql.NewError(mysql.ER_DUP_ENTRY, fmt.Sprintf("Duplicate entry '%s' for key '%s'", first.value, u.name))
}

// parts splits length-prefixed parts.
func parts(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			break
		}
		out = append(out, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return out
}

// firstPart is the first length-prefixed part of b (an entry's walk key).
func firstPart(b []byte) []byte {
	if p := parts(b); len(p) > 0 {
		return p[0]
	}
	return nil
}

// stillDuplicated asks the table, by primary key, whether two or more of
// the group's rows still hold its key (the copy may have read a value that
// moved between two chunks), and returns the duplicate if so.
func (r *runner) stillDuplicated(u uniqueIndex, e sortEntry, pks [][]byte) (*dupFound, error) {
	keys := make([][]string, len(pks))
	for i, pk := range pks {
		vals := parts(pk)
		if len(vals) != len(r.t.Key) {
			return nil, errors.New("sort: a malformed key in a run")
		}
		keys[i] = make([]string, len(vals))
		for j, v := range vals {
			c := r.t.Key[j]
			if isIntType(c.DataType) {
				keys[i][j] = intFromKey(v)
				continue
			}
			var err error
			if keys[i][j], err = c.bytesLiteral(v); err != nil {
				return nil, err
			}
		}
	}
	raws := parts(e.rest)[1:]
	if len(raws) < len(u.parts) {
		return nil, errors.New("sort: a malformed entry in a run")
	}
	conds := make([]string, len(u.parts))
	shown := make([]string, len(u.parts))
	for i, p := range u.parts {
		lit, err := partLiteral(p, raws[i])
		if err != nil {
			return nil, err
		}
		conds[i] = p.raw + " = " + lit
		shown[i] = p.raw
	}
	res, err := r.conn.Execute("SELECT CONCAT_WS('-', " + strings.Join(shown, ", ") + "), " + r.t.keyList() + " FROM " + r.t.name() +
		" WHERE " + r.t.keyIn(keys) + " AND " + strings.Join(conds, " AND ") + " ORDER BY " + r.t.keyList() + " LIMIT 2")
	if err != nil || res.RowNumber() < 2 {
		return nil, err
	}
	value, _ := res.GetString(0, 0)
	return &dupFound{value: value, second: r.encodeKey(res.Values[1][1:])}, nil
}

// encodeKey encodes a walk key as runs hold it: integers in numeric order,
// the rest by their bytes.
func (r *runner) encodeKey(vals []mysql.FieldValue) []byte {
	var pk []byte
	for i, v := range vals {
		if isIntType(r.t.Key[i].DataType) {
			pk = appendPart(pk, intKey(v))
		} else {
			pk = appendPart(pk, fieldBytes(v))
		}
	}
	return pk
}

// partLiteral renders a key part's value, as read, as an SQL literal.
func partLiteral(p uniquePart, raw []byte) (string, error) {
	switch {
	case p.isInt || p.col.DataType == "decimal":
		return numeric(raw)
	case p.col.DataType == "float" || p.col.DataType == "double":
		if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
			return "", err
		}
		return string(raw), nil
	case isTemporal(p.col.DataType):
		return temporal(raw)
	}
	return p.col.bytesLiteral(raw)
}

// strerror is the C library's message for errno, as MySQL prints it (Go's
// is in lower case).
func strerror(errno syscall.Errno) string {
	m := errno.Error()
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:]
}
