package feed

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/shardtail/shardtail/sql"
)

// TestStatement: a request is the SUBSCRIBE a pgwire client would write.
func TestStatement(t *testing.T) {
	for _, tc := range []struct {
		name, collection, query string
		headers                 map[string]string
		want                    string
	}{
		{"Bare", "t", "", nil, "SUBSCRIBE t WITH (SNAPSHOT = true, PROGRESS)"},
		{"Qualified", "public.t", "snapshot=false&as_of=5&up_to=9", nil, "SUBSCRIBE public.t WITH (SNAPSHOT = false, PROGRESS) AS OF 5 UP TO 9"},
		{"Shape", "t", "columns=a,B&where=a+%3E+1+AND+b+IS+NOT+NULL", nil, `SUBSCRIBE (SELECT a, "B" FROM t WHERE a > 1 AND b IS NOT NULL) WITH (SNAPSHOT = true, PROGRESS)`},
		{"Envelope", "t", "envelope=debezium&key=a", nil, "SUBSCRIBE t ENVELOPE DEBEZIUM (KEY (a)) WITH (SNAPSHOT = true, PROGRESS)"},
		{"After", "t", "after=10", nil, "SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS) AS OF 9"},
		{"AfterZero", "t", "after=0", nil, "SUBSCRIBE t WITH (SNAPSHOT = true, PROGRESS) AS OF 0"},
		{"LastEventIDOverAsOf", "t", "as_of=3&after=5", map[string]string{"Last-Event-ID": "7"}, "SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS) AS OF 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/subscribe/x?"+tc.query, nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			req, err := parseRequest(r, tc.collection)
			if err != nil {
				t.Fatal(err)
			}
			st, err := req.statement()
			if err != nil {
				t.Fatal(err)
			}
			if got := st.String(); got != tc.want {
				t.Errorf("statement\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// FuzzParseRequest: any query string and resume header either fails to
// parse or becomes one SUBSCRIBE whose text parses back to itself, so a
// parameter can never smuggle in another statement or clause.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range [][3]string{
		{"t", "where=a%3D1&columns=a", ""},
		{"public.t", "envelope=upsert&key=a,b&snapshot=false&up_to=10", "5"},
		{"t", "where=true)%20UNION%20SELECT%201", ""},
		{"t", "where=a%3D1%3B%20DROP%20TABLE%20t", ""},
		{"a.b.c", "columns=x&where=x%20IN%20(1,2)&live=false", ""},
		{"t", "after=18446744073709551615", "0"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, collection, query, lastEventID string) {
		u := &url.URL{Path: "/v1/subscribe/x", RawQuery: query}
		r := httptest.NewRequest("GET", "/", nil)
		r.URL = u
		if lastEventID != "" {
			r.Header.Set("Last-Event-ID", lastEventID)
		}
		req, err := parseRequest(r, collection)
		if err != nil {
			return
		}
		st, err := req.statement()
		if err != nil {
			return
		}
		text := st.String()
		back, err := sql.Parse(text)
		if err != nil {
			t.Fatalf("%s does not parse: %v", text, err)
		}
		if _, ok := back.(*sql.Subscribe); !ok || back.String() != text {
			t.Fatalf("%s parses back as %T %s", text, back, back)
		}
	})
}
