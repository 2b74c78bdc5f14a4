package consumer

import (
	"strconv"
	"strings"
)

// Source is one collection to subscribe to.
type Source struct {
	// Name is the collection's name as SQL text (quote it if it needs
	// quoting), or a parenthesised SELECT.
	Name string
	// ID is the collection's catalog id (e.g. "u12"). When set, the
	// statement refers to the object by id ([u12 AS name]), so a drop and
	// recreate under the same name cannot slip in between lookup and
	// subscribe.
	ID string
	// Envelope is an optional envelope clause, e.g.
	// "ENVELOPE UPSERT (KEY (id))"; empty for plain output with mz_diff.
	Envelope string
}

// Statement returns the SUBSCRIBE that reads src from frontier from: the
// whole collection with its snapshot when from is zero, else every update at
// or after from and nothing before.
//
// Resuming after progress F means AS OF F-1 WITH (SNAPSHOT = false): AS OF
// is inclusive of the snapshot time and SNAPSHOT = false omits exactly that
// time, so the first update delivered is at F. This is the only place that
// subtracts one.
func (src Source) Statement(from Frontier) string {
	var b strings.Builder
	b.WriteString("SUBSCRIBE ")
	b.WriteString(src.ref())
	if src.Envelope != "" {
		b.WriteByte(' ')
		b.WriteString(src.Envelope)
	}
	if from == 0 {
		b.WriteString(" WITH (PROGRESS)")
		return b.String()
	}
	b.WriteString(" WITH (PROGRESS, SNAPSHOT = false) AS OF ")
	b.WriteString(strconv.FormatUint(uint64(from)-1, 10))
	return b.String()
}

// StatementAt returns the SUBSCRIBE that reads src with its snapshot at
// asOf: several collections subscribed at one AS OF start from one cut.
func (src Source) StatementAt(asOf uint64) string {
	var b strings.Builder
	b.WriteString("SUBSCRIBE ")
	b.WriteString(src.ref())
	if src.Envelope != "" {
		b.WriteByte(' ')
		b.WriteString(src.Envelope)
	}
	b.WriteString(" WITH (PROGRESS) AS OF ")
	b.WriteString(strconv.FormatUint(asOf, 10))
	return b.String()
}

func (src Source) ref() string {
	if src.ID == "" {
		return src.Name
	}
	return "[" + src.ID + " AS " + src.Name + "]"
}
