package pgwire

import (
	"encoding/binary"

	"github.com/jackc/pgproto3/v2"
)

// AppendDataRow appends a DataRow message with the given column values to buf
// and returns the extended buffer. A nil value is NULL; a non-nil empty value
// is the empty string. Values must already be in the column's wire format.
func AppendDataRow(buf []byte, cols [][]byte) []byte {
	size := 4 + 2
	for _, c := range cols {
		size += 4 + len(c)
	}
	buf = append(buf, 'D')
	buf = binary.BigEndian.AppendUint32(buf, uint32(size))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(cols)))
	for _, c := range cols {
		if c == nil {
			buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // -1: NULL
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(c)))
		buf = append(buf, c...)
	}
	return buf
}

// AppendCopyData appends a CopyData message carrying data to buf.
func AppendCopyData(buf, data []byte) []byte {
	buf = append(buf, 'd')
	buf = binary.BigEndian.AppendUint32(buf, uint32(4+len(data)))
	return append(buf, data...)
}

// AppendParameterStatus appends a ParameterStatus message to buf; a session
// reports a changed reported variable (SET application_name) with it.
func AppendParameterStatus(buf []byte, name, value string) []byte {
	buf = append(buf, 'S')
	buf = binary.BigEndian.AppendUint32(buf, uint32(4+len(name)+1+len(value)+1))
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = append(buf, value...)
	return append(buf, 0)
}

// Notice is a NoticeResponse: a message to the client that is not an error.
type Notice struct {
	Severity string // NOTICE when empty; also WARNING, INFO, DEBUG, LOG
	Code     string // SQLSTATE, e.g. "01000" (warning) or "00000"
	Message  string
	Detail   string
	Hint     string
}

// AppendNotice appends a NoticeResponse message to buf.
func AppendNotice(buf []byte, n Notice) []byte {
	sev := n.Severity
	if sev == "" {
		sev = "NOTICE"
	}
	msg := pgproto3.NoticeResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                n.Code,
		Message:             n.Message,
		Detail:              n.Detail,
		Hint:                n.Hint,
	}
	out, err := msg.Encode(buf)
	if err != nil {
		// Only a body over 1 GiB fails to encode; drop such a notice rather
		// than the result carrying it.
		return buf
	}
	return out
}

// isDataRow reports whether msg is a DataRow, the messages a row limit counts.
func isDataRow(msg []byte) bool { return len(msg) > 0 && msg[0] == 'D' }
