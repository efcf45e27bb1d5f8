package cluster

import (
	"reflect"
	"testing"
	"time"

	"tableproxy/lease"
)

// Entries as earlier versions wrote them decode into their operations and
// encode again to the same bytes: a log or a forwarded proposal of either
// version applies the same.
func TestEntryEncodingIsUnchanged(t *testing.T) {
	for _, c := range []struct {
		data string
		want entry
	}{
		{`{"op":"renew","node":"n1","inc":7,"addr":"127.0.0.1:1","applied":3}`,
			entry{op: renewal{Node: "n1", Inc: 7, Addr: "127.0.0.1:1", Applied: 3}}},
		{`{"op":"open","node":"n1","inc":7,"intent":"n1/7/1","tables":[{"Schema":"s","Table":"a"}]}`,
			entry{op: intentOpen{Node: "n1", Inc: 7, Intent: "n1/7/1", Tables: []lease.TableID{tA}}}},
		{`{"op":"close","intent":"n1/7/1","bumps":[{"Schema":"s","Table":"b"}]}`,
			entry{op: intentClose{Intent: "n1/7/1"}, bumps: []lease.TableID{tB}}},
		{`{"op":"bump","tables":[{"Schema":"s","Table":"a"}]}`, entry{op: versionBump{Tables: []lease.TableID{tA}}}},
		{`{"op":"bump","node":"n1","inc":7,"watching":false}`,
			entry{op: versionBump{}, word: &binlogWord{Node: "n1", Inc: 7}}},
		{`{"op":"cache","entry":{"schema":"s","table":"a","cached_by":"root","since":"2026-12-01T10:00:00Z"}}`,
			entry{op: tableCached{Entry: CatalogEntry{Schema: "s", Table: "a", CachedBy: "root", Since: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}}}},
		{`{"op":"nocache","tables":[{"Schema":"s","Table":"a"}]}`, entry{op: tableUncached{Tables: []lease.TableID{tA}}}},
		{`{"op":"forget","node":"n2"}`, entry{op: memberForgotten{Node: "n2"}}},
	} {
		e, err := unmarshalEntry([]byte(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		if !reflect.DeepEqual(e, c.want) {
			t.Errorf("%s decoded as %+v", c.data, e)
		}
		if got := e.marshalled(t); got != c.data {
			t.Errorf("%s encodes again as %s", c.data, got)
		}
	}
	if _, err := unmarshalEntry([]byte(`{"op":"promote"}`)); err == nil {
		t.Error("an unknown operation decoded")
	}
}

func (e entry) marshalled(t *testing.T) string {
	t.Helper()
	data, err := e.marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
