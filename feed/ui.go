package feed

import (
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// uiFiles are the page of one collection and its script: plain HTML and a
// few lines of JavaScript, no build step.
//
//go:embed ui
var uiFiles embed.FS

var (
	tableTemplate = template.Must(template.ParseFS(uiFiles, "ui/table.html"))
	indexTemplate = template.Must(template.New("index").Funcs(template.FuncMap{"path": collectionPath}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>shardtail feed</title></head>
<body><h1>Collections</h1><ul>
{{range .}}<li><a href="/ui/{{path .}}">{{.}}</a> (<a href="/v1/subscribe/{{path .}}">stream</a>)</li>
{{else}}<li>none readable by this role</li>
{{end}}</ul></body></html>
`))
)

// collectionPath is the {collection} path segment that names the
// collection name: the name, qualified when it holds a dot (see
// collectionName), escaped.
func collectionPath(name string) string {
	if strings.Contains(name, ".") {
		name = "materialize.public." + name
	}
	return url.PathEscape(name)
}

// serveIndex serves GET /: the collections the role may read.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	user, err := h.authenticate(r)
	if err != nil {
		writeError(w, toErrorBody(err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	indexTemplate.Execute(w, h.coord.Readable(user))
}

// serveUI serves GET /ui/{collection}: a live table of the collection
// (its script is GET /ui/feed.js). The page itself holds no data: the
// stream it opens is authorized as any other.
func (h *Handler) serveUI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	tableTemplate.Execute(w, r.PathValue("collection"))
}
