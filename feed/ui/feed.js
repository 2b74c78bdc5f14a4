// renderFeed keeps table equal to the collection that url streams. Rows
// are applied when the progress event that closes their timestamp
// arrives; rows not yet closed when the connection drops are dropped, and
// the browser's reconnect (with Last-Event-ID) sends them again.
function renderFeed(url, table, status) {
  // JSON of the row's columns -> {row, n: its count}; with
  // ?envelope=upsert or debezium, JSON of its key= columns -> {row, n: 1}.
  const state = new Map();
  const key = new URL(url, location.href).searchParams.get("key");
  const keyColumns = key === null ? null : key.split(",").map((c) => c.trim());
  let pending = [];
  let columns = null;
  const es = new EventSource(url);
  window.feedState = { state: state, frontier: null, events: 0, errors: 0, resets: 0 };
  let failed = ""; // the server's last event: error, until a stream opens
  es.addEventListener("open", () => { failed = ""; status.textContent = "connected"; });
  es.addEventListener("error", (e) => {
    pending = [];
    window.feedState.errors++;
    if (e.data) {
      // The server's event: error: the stream failed. The connection's
      // end follows, and the browser reconnects.
      const err = JSON.parse(e.data);
      failed = "error " + err.code + ": " + err.error;
      status.textContent = failed;
    } else if (es.readyState === EventSource.CLOSED) {
      // An answer that is no stream (an error, 404 for an unknown
      // collection, 503 past the server's limit): the browser gives up.
      status.textContent = (failed ? failed + "; " : "") + "closed: the server refused the stream (" + url + " says why)";
    } else {
      status.textContent = (failed ? failed + "; " : "") + "reconnecting";
    }
  });
  es.addEventListener("rows", (e) => { pending.push(...JSON.parse(e.data)); window.feedState.events++; });
  es.addEventListener("progress", (e) => {
    for (const r of pending) {
      const row = Object.assign({}, r);
      delete row.mz_timestamp;
      delete row.mz_diff;
      delete row.mz_state;
      if (columns === null) columns = Object.keys(row);
      if (r.mz_state !== undefined) {
        // An envelope's row: the key's row now (upsert, insert, a
        // key_violation's nulls) or none (delete).
        const k = JSON.stringify(keyColumns.map((c) => row[c]));
        if (r.mz_state === "delete") state.delete(k); else state.set(k, { row: row, n: 1 });
        continue;
      }
      const k = JSON.stringify(row);
      const entry = state.get(k) || { row: row, n: 0 };
      entry.n += r.mz_diff;
      if (entry.n === 0) state.delete(k); else state.set(k, entry);
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
    for (const { row, n } of state.values()) {
      for (let i = 0; i < n; i++) {
        const r = body.insertRow();
        for (const c of columns) r.insertCell().textContent = row[c] === null ? "NULL" : String(row[c]);
      }
    }
  }
  function escape(s) { const d = document.createElement("div"); d.textContent = s; return d.innerHTML; }
  return es;
}
