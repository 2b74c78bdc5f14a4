package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeMetrics serves /metrics from a list of pages, one per scrape, the
// last one repeated.
type fakeMetrics struct {
	mu      sync.Mutex
	pages   []string
	scrapes int
}

func (f *fakeMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := f.pages[min(f.scrapes, len(f.pages)-1)]
	f.scrapes++
	fmt.Fprint(w, page)
}

func metricsPage(sessions, buffered int) string {
	return fmt.Sprintf("# TYPE shardtail_sessions gauge\nshardtail_sessions %d\n%s %d\n", sessions, gaugeLogBuffered, buffered)
}

// TestStatementLogSettler: the scrape after a storm waits until the
// storm's sessions have closed and the statement log appended their
// records, and not at all on a server without the log's gauge.
func TestStatementLogSettler(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pages       []string
		wantScrapes int // the one before the storm included
	}{
		{"Settles", []string{
			metricsPage(2, 0), // before the storm
			metricsPage(9, 3), // sessions still open
			metricsPage(2, 7), // closed, records waiting
			metricsPage(2, 0), // appended
			metricsPage(2, 0),
		}, 4},
		{"NoStatementLog", []string{"shardtail_sessions 2\n", "shardtail_sessions 9\n"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeMetrics{pages: tc.pages}
			srv := httptest.NewServer(f)
			defer srv.Close()
			statementLogSettler(context.Background(), srv.URL)()
			if f.scrapes != tc.wantScrapes {
				t.Errorf("got %d scrapes, want %d", f.scrapes, tc.wantScrapes)
			}
		})
	}
}
