package proxy

import (
	"encoding/binary"
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
)

// The relay copies the backend's response to the client packet by packet,
// as the backend sent it: bytes, sequence numbers and all. It decodes only
// what it must to know where a response ends (OK, ERR and EOF packets, column
// counts) and what the plugins are told (rows, affected rows, errors).

// errClientGone and errBackendLost end a session and say which side broke;
// errSessionEnds ends it on purpose.
var (
	errClientGone  = errors.New("client connection lost")
	errBackendLost = errors.New("backend connection lost")
	// errSessionEnds: the session ends after the error it has written,
	// as the backend's server would end it.
	errSessionEnds = errors.New("session ended by the proxy")
)

// relayStats is what a relayed response told the proxy.
type relayStats struct {
	rows     uint64
	affected uint64
	warnings uint16
	status   uint16
	haveStat bool
	results  int            // results (OK packets and result sets) in the response
	err      *mysql.MyError // the backend's ERR, if the response ended in one
}

func (r *relayStats) setStatus(status, warnings uint16) {
	r.status, r.warnings, r.haveStat = status, warnings, true
}

// forward sends the client's command packet (in s.cmd) to the backend.
func (s *session) forward() error {
	buf := s.cmd.b
	if ps := s.exec; ps != nil && len(buf) > 4 && buf[4] == mysql.COM_STMT_EXECUTE {
		buf = ps.withBackendTypes(buf)
	}
	return s.forwardPacket(buf)
}

// forwardPacket sends one command packet (buf has 4 bytes of header room
// before the payload) to the backend.
func (s *session) forwardPacket(buf []byte) error {
	s.backend.ResetSequence()
	if err := s.backend.WritePacket(buf); err != nil {
		return errBackendLost
	}
	return nil
}

// pump reads one packet from the backend and writes it to the client. The
// returned payload is valid until the next pump.
func (s *session) pump() ([]byte, error) {
	s.resp.reset(0)
	seq := s.backend.Sequence
	if err := s.backend.ReadPacketTo(&s.resp); err != nil {
		return nil, errBackendLost
	}
	payload := s.resp.payload()
	if len(payload) == 0 {
		return nil, errBackendLost
	}
	if s.sink {
		return payload, nil
	}
	// The backend's sequence numbers are the client's: both sides started
	// the command at 0 and the proxy writes exactly the packets it reads
	// (a packet of 16 MB or more is split at the same points on both sides).
	s.client.pc.Sequence = seq
	// WritePacket rewrites the header room in place (and, for packets of
	// 16 MB or more, the split points), so the payload must be inspected by
	// the caller before the next read, which it is.
	if s.record != nil {
		s.recordPacket(payload)
	}
	if err := s.client.pc.WritePacket(s.resp.b); err != nil {
		return nil, errClientGone
	}
	return payload, nil
}

// recordPacket copies a relayed payload into the full capture, or gives
// up on it once the response outgrows its cap (see plugins.Capture.Full).
// Only a statement whose filter asked for a full capture gets here: the
// pass-through path pays one pointer test per packet.
func (s *session) recordPacket(payload []byte) {
	c := s.record
	if c.Truncated {
		return
	}
	if len(c.Data)+len(payload) > c.MaxBytes {
		c.Data, c.Ends, c.Truncated = nil, nil, true
		return
	}
	c.Data = append(c.Data, payload...)
	c.Ends = append(c.Ends, len(c.Data))
}

// pumpN relays n packets.
func (s *session) pumpN(n uint64) error {
	for ; n > 0; n-- {
		if _, err := s.pump(); err != nil {
			return err
		}
	}
	return nil
}

// relayQueryResponse relays the response to COM_QUERY or COM_STMT_EXECUTE:
// OK, ERR, a LOCAL INFILE request, or result sets, for as long as the
// backend says more results exist.
func (s *session) relayQueryResponse(st *relayStats) error {
	for {
		p, err := s.pump()
		if err != nil {
			return err
		}
		st.results++
		switch p[0] {
		case mysqlwire.MarkOK:
			ok, _ := mysqlwire.ParseOK(p)
			st.affected += ok.AffectedRows
			st.setStatus(ok.Status, ok.Warnings)
			if ok.Status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
				return nil
			}
		case mysqlwire.MarkErr:
			if isProgressReport(p) {
				continue // MariaDB progress report; the response goes on
			}
			st.err = mysqlwire.ParseErr(p)
			return nil
		case mysqlwire.MarkLocalInfil:
			if err := s.relayLocalInfile(); err != nil {
				return err
			}
			// The backend's OK or ERR for the load follows, as a new
			// response in the same loop.
		default:
			more, err := s.relayResultSet(p, st)
			if err != nil || !more {
				return err
			}
		}
	}
}

// relayResultSet relays one result set whose column-count packet is p.
// It reports whether more results follow.
func (s *session) relayResultSet(p []byte, st *relayStats) (bool, error) {
	ncols, _, ok := mysqlwire.ReadLenEncInt(p)
	if !ok {
		return false, errBackendLost
	}
	if s.capture != nil {
		s.captureSets++
		for i := uint64(0); i < ncols; i++ {
			p, err := s.pump()
			if err != nil {
				return false, err
			}
			if s.captureSets == 1 {
				s.capture.Columns = append(s.capture.Columns, append([]byte(nil), p...))
			}
		}
	} else if err := s.pumpN(ncols); err != nil {
		return false, err
	}
	p, err := s.pump() // EOF after the column definitions
	if err != nil {
		return false, err
	}
	if !mysqlwire.IsEOF(p) {
		if p[0] == mysqlwire.MarkErr {
			st.err = mysqlwire.ParseErr(p)
			return false, nil
		}
		return false, errBackendLost
	}
	w, status := mysqlwire.ParseEOF(p)
	if s.capture != nil && s.captureSets == 1 {
		s.capture.MidStatus = status
	}
	if status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
		// A cursor was opened (COM_STMT_EXECUTE with a cursor flag): rows
		// come later, through COM_STMT_FETCH.
		st.setStatus(status, w)
		return false, nil
	}
	for {
		p, err := s.pump()
		if err != nil {
			return false, err
		}
		if mysqlwire.IsEOF(p) {
			w, status := mysqlwire.ParseEOF(p)
			st.setStatus(status, w)
			return status&mysql.SERVER_MORE_RESULTS_EXISTS != 0, nil
		}
		if p[0] == mysqlwire.MarkErr {
			st.err = mysqlwire.ParseErr(p)
			return false, nil
		}
		st.rows++
	}
}

// relayRows relays rows up to an EOF or ERR (COM_STMT_FETCH, and the column
// list of COM_FIELD_LIST).
func (s *session) relayRows(st *relayStats) error {
	for {
		p, err := s.pump()
		if err != nil {
			return err
		}
		if mysqlwire.IsEOF(p) {
			w, status := mysqlwire.ParseEOF(p)
			st.setStatus(status, w)
			return nil
		}
		if p[0] == mysqlwire.MarkErr {
			st.err = mysqlwire.ParseErr(p)
			return nil
		}
		st.rows++
	}
}

// relayLocalInfile relays the file the client sends for LOAD DATA LOCAL
// INFILE: packets up to and including an empty one.
func (s *session) relayLocalInfile() error {
	// The client's socket is read here: no watcher may hold it.
	s.enterPhase(phaseBusyReading)
	defer s.enterPhase(phaseBusy)
	for {
		s.resp.reset(0)
		// The client's packets continue the sequence of the request.
		if err := s.client.flush(); err != nil {
			return errClientGone
		}
		seq := s.client.pc.Sequence
		if err := s.client.readPacket(&s.resp); err != nil {
			return errClientGone
		}
		s.backend.Sequence = seq
		empty := len(s.resp.payload()) == 0
		if err := s.backend.WritePacket(s.resp.b); err != nil {
			return errBackendLost
		}
		if empty {
			return nil
		}
	}
}

// relayPrepareResponse relays the response to COM_STMT_PREPARE and returns
// the statement id the backend assigned and its parameter count.
func (s *session) relayPrepareResponse(st *relayStats) (uint32, int, error) {
	p, err := s.pump()
	if err != nil {
		return 0, 0, err
	}
	if p[0] == mysqlwire.MarkErr {
		st.err = mysqlwire.ParseErr(p)
		return 0, 0, nil
	}
	if p[0] != mysqlwire.MarkOK || len(p) < 12 {
		return 0, 0, errBackendLost
	}
	id := binary.LittleEndian.Uint32(p[1:])
	ncols := uint64(binary.LittleEndian.Uint16(p[5:]))
	nparams := uint64(binary.LittleEndian.Uint16(p[7:]))
	st.warnings = binary.LittleEndian.Uint16(p[10:])
	if nparams > 0 {
		if err := s.pumpN(nparams + 1); err != nil {
			return 0, 0, err
		}
	}
	if ncols > 0 {
		if err := s.pumpN(ncols + 1); err != nil {
			return 0, 0, err
		}
	}
	return id, int(nparams), nil
}

// relayOne relays a single-packet response (OK, ERR, EOF, or the string of
// COM_STATISTICS).
func (s *session) relayOne(st *relayStats) error {
	p, err := s.pump()
	if err != nil {
		return err
	}
	switch {
	case p[0] == mysqlwire.MarkErr:
		st.err = mysqlwire.ParseErr(p)
	case p[0] == mysqlwire.MarkOK:
		if ok, valid := mysqlwire.ParseOK(p); valid {
			st.affected = ok.AffectedRows
			st.setStatus(ok.Status, ok.Warnings)
		}
	case mysqlwire.IsEOF(p):
		w, status := mysqlwire.ParseEOF(p)
		st.setStatus(status, w)
	}
	return nil
}
