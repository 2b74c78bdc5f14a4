// renderFeed keeps table equal to the collection that url streams. Rows
// are applied when the progress event that closes their timestamp
// arrives; rows not yet closed when the connection drops are dropped, and
// the browser's reconnect (with Last-Event-ID) sends them again.
function renderFeed(url, table, status) {
  const state = new Map(); // JSON of the row's columns -> count
  let pending = [];
  let columns = null;
  const es = new EventSource(url);
  window.feedState = { state: state, frontier: null, events: 0, errors: 0, resets: 0 };
  es.addEventListener("open", () => { status.textContent = "connected"; });
  es.addEventListener("error", () => { pending = []; window.feedState.errors++; status.textContent = "reconnecting"; });
  es.addEventListener("rows", (e) => { pending.push(...JSON.parse(e.data)); window.feedState.events++; });
  es.addEventListener("progress", (e) => {
    for (const r of pending) {
      const diff = r.mz_diff;
      const row = Object.assign({}, r);
      delete row.mz_timestamp;
      delete row.mz_diff;
      if (columns === null) columns = Object.keys(row);
      const key = JSON.stringify(row);
      const n = (state.get(key) || 0) + diff;
      if (n === 0) state.delete(key); else state.set(key, n);
    }
    pending = [];
    window.feedState.frontier = JSON.parse(e.data).frontier;
    status.textContent = "up to date at " + window.feedState.frontier;
    render();
  });
  es.addEventListener("reset", () => {
    // The position is gone: start over with a new snapshot, without the
    // resume point the page may have been opened with (?after=), which
    // would only be reset again.
    es.close();
    state.clear();
    pending = [];
    const resets = window.feedState.resets + 1;
    const fresh = new URL(url, location.href);
    fresh.searchParams.delete("after");
    renderFeed(fresh.href, table, status);
    window.feedState.resets = resets;
  });
  es.addEventListener("end", () => { es.close(); status.textContent = "complete"; });
  function render() {
    const head = table.tHead, body = table.tBodies[0];
    head.innerHTML = "";
    body.innerHTML = "";
    if (columns === null) return;
    const tr = head.insertRow();
    for (const c of columns) tr.insertCell().outerHTML = "<th>" + escape(c) + "</th>";
    for (const [key, n] of state) {
      const row = JSON.parse(key);
      for (let i = 0; i < n; i++) {
        const r = body.insertRow();
        for (const c of columns) r.insertCell().textContent = row[c] === null ? "NULL" : String(row[c]);
      }
    }
  }
  function escape(s) { const d = document.createElement("div"); d.textContent = s; return d.innerHTML; }
  return es;
}
