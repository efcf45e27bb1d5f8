package load

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/cache/eval"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
)

// Definition reads id's definition without its rows: a snapshot with the
// table's column definitions, primary key and collations and no row, on
// which a statement can be planned as it would be were the table cached
// (the advisor of package digest asks it of tables that are not). It
// refuses what Snapshot refuses before reading rows: no primary key, or a
// shape the cache cannot keep.
func Definition(ctx context.Context, conn *client.Conn, id lease.TableID, colls *eval.Collations) (*eval.Snapshot, error) {
	if err := conn.Conn.SetDeadline(deadlineOf(ctx)); err != nil {
		return nil, err
	}
	defer conn.Conn.SetDeadline(time.Time{})
	pk, collByName, err := definitionOf(conn, id, colls)
	if err != nil {
		return nil, err
	}
	r, err := conn.Execute("SELECT * FROM " + mysqlwire.QuoteTable(id.Schema, id.Table) + " LIMIT 0")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s := &eval.Snapshot{ID: id}
	if err := setFields(s, r.Fields, pk); err != nil {
		return nil, err
	}
	if err := index(s, conn, collByName); err != nil {
		return nil, err
	}
	s.Layout = eval.LayoutOf(s)
	return s, nil
}

// definitionOf reads what a copy of id needs before its rows: its primary
// key, which it must have, and its string columns' collations; it refuses
// a shape the cache cannot keep (see UnservableShape).
func definitionOf(conn *client.Conn, id lease.TableID, colls *eval.Collations) ([]string, map[string]*eval.Collation, error) {
	pk, err := PrimaryKey(conn, id)
	if err != nil {
		return nil, nil, err
	}
	if len(pk) == 0 {
		if exists, err := tableExists(conn, id); err != nil {
			return nil, nil, err
		} else if !exists {
			return nil, nil, &ErrNoTable{ID: id}
		}
		return nil, nil, fmt.Errorf("%s has no primary key", id)
	}
	if why, err := UnservableShape(conn, id); err != nil || why != "" {
		if err == nil {
			err = fmt.Errorf("%s: %s", id, why)
		}
		return nil, nil, err
	}
	collByName, err := columnCollations(conn, id, colls)
	if err != nil {
		return nil, nil, err
	}
	return pk, collByName, nil
}

// setFields gives s the column definitions of a result of SELECT * and
// the positions of the primary key's columns among them.
func setFields(s *eval.Snapshot, fields []*mysql.Field, pk []string) error {
	for _, f := range fields {
		// A field's names point into the result's packet buffer, which
		// the client library hands to the next query once the result is
		// closed: parse a copy, so that they point into memory of the
		// snapshot's own.
		cp, err := mysql.FieldData(append([]byte(nil), f.Data...)).Parse()
		if err != nil {
			return err
		}
		s.Fields = append(s.Fields, cp)
		s.Bytes += int64(len(f.Data)) + 64
	}
	for _, name := range pk {
		for i, f := range s.Fields {
			if strings.EqualFold(string(f.OrgName), name) {
				s.PK = append(s.PK, i)
			}
		}
	}
	return nil
}

// index builds s's indexes over its rows and learns its string columns'
// collations, on conn.
func index(s *eval.Snapshot, conn *client.Conn, collByName map[string]*eval.Collation) error {
	s.IndexPK()
	s.BuildIndexes()
	s.ScanCharsets()
	if err := s.LearnCollations(conn, collByName); err != nil {
		return err
	}
	s.ReserveStringIndexes()
	return nil
}

// ErrNoTable: the table is not there (dropped or renamed, or a view now
// holds its name).
type ErrNoTable struct{ ID lease.TableID }

func (e *ErrNoTable) Error() string { return fmt.Sprintf("%s does not exist as a base table", e.ID) }

// tableExists reports whether id is a base table on the backend.
func tableExists(conn *client.Conn, id lease.TableID) (bool, error) {
	r, err := conn.Execute(`SELECT COUNT(*) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')`, id.Schema, id.Table)
	if err != nil {
		return false, err
	}
	defer r.Close()
	n, _ := r.GetInt(0, 0)
	return n > 0, nil
}
