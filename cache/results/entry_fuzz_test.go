package results

import (
	"bytes"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// replayWriter keeps what a replay writes, packet by packet.
type replayWriter struct {
	plugins.ResponseWriter // (only the methods below are called)
	packets                [][]byte
	rows                   uint64
}

func (w *replayWriter) WritePacket(p []byte) error {
	w.packets = append(w.packets, append([]byte(nil), p...))
	return nil
}
func (w *replayWriter) Status() uint16     { return mysql.SERVER_STATUS_AUTOCOMMIT }
func (w *replayWriter) Rows(n uint64)      {}
func (w *replayWriter) SetStatus(s uint16) {}

// FuzzNewEntry hands the result cache a recorded response of any bytes,
// cut into packets of any lengths (a backend's answer is input too): it
// must not panic, and an answer it keeps must replay packet for packet as
// recorded, its two EOF packets rewritten with the session's status.
func FuzzNewEntry(f *testing.F) {
	good := [][]byte{{1}, []byte("\x03def\x00\x01t\x01t\x01a\x01a\x0c\x21\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00"),
		{0xfe, 0, 0, 2, 0}, {1, '7'}, {0xfb}, {0xfe, 0, 0, 2, 0}}
	var data, lens []byte
	for _, p := range good {
		data = append(data, p...)
		lens = append(lens, byte(len(p)))
	}
	f.Add(data, lens)
	f.Add([]byte{2, 0xfe, 0, 0, 0, 0}, []byte{1, 5})
	f.Add([]byte{0xfc, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 0xff, 1, 0}, []byte{3, 5, 3})
	f.Fuzz(func(t *testing.T, data, lens []byte) {
		c := &plugins.Capture{Full: true, Data: data}
		end := 0
		for _, n := range lens {
			if end+int(n) > len(data) {
				break
			}
			end += int(n)
			c.Ends = append(c.Ends, end)
		}
		e, ok := NewEntry("k", c)
		if !ok {
			return
		}
		var w replayWriter
		if err := e.Replay(&w); err != nil {
			t.Fatal(err)
		}
		if len(w.packets) != len(c.Ends) {
			t.Fatalf("replayed %d packets of %d", len(w.packets), len(c.Ends))
		}
		start := 0
		for i, end := range c.Ends {
			rec, got := data[start:end], w.packets[i]
			start = end
			if i == int(e.mid) || i == int(e.final) {
				if !mysqlwire.IsEOF(got) || !mysqlwire.IsEOF(rec) {
					t.Fatalf("packet %d: recorded % x, replayed % x: want EOF packets", i, rec, got)
				}
				continue
			}
			if !bytes.Equal(rec, got) {
				t.Fatalf("packet %d: recorded % x, replayed % x", i, rec, got)
			}
		}
	})
}
