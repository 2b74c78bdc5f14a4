package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob/file"
	"github.com/shardtail/shardtail/persist/blob/mem"
	"github.com/shardtail/shardtail/persist/blob/s3"
)

// s3Params are the query parameters an s3:// URL accepts, each setting the
// s3.Config field it is named after.
var s3Params = []string{
	"endpoint", "region", "path_style", "access_key_id", "secret_access_key",
	"multipart_threshold", "multipart_part_size",
}

// Open returns the Blob that rawURL names:
//
//	file:///abs/dir        files under /abs/dir (created if missing)
//	file://relative/dir    files under ./relative/dir
//	mem://                 an empty in-memory Blob
//	s3://BUCKET/PREFIX?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//	                       objects PREFIX/KEY in BUCKET; more parameters:
//	                       access_key_id, secret_access_key (else the default
//	                       AWS credential chain), multipart_threshold and
//	                       multipart_part_size (bytes)
//
// A malformed URL gives an error wrapping ErrInvalidURL that names the bad
// part. The caller closes the Blob.
func Open(ctx context.Context, rawURL string) (persist.Blob, error) {
	loc, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	switch loc.scheme {
	case "mem":
		return mem.New(), nil
	case "file":
		return file.Open(ctx, loc.dir)
	default: // "s3"
		return s3.New(ctx, loc.s3)
	}
}

// Redact returns rawURL fit for a log line: the value of every parameter
// whose name mentions "secret" (secret_access_key, misspelt or not), and a
// password in the user info, replaced by "xxxxx".
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		scheme, _, _ := strings.Cut(rawURL, ":")
		return scheme + ":(unparsable)"
	}
	// Rewrite the raw query pair by pair: url.Values would silently drop a
	// malformed pair, secret and all.
	pairs := strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' })
	for i, pair := range pairs {
		name, _, _ := strings.Cut(pair, "=")
		if unescaped, err := url.QueryUnescape(name); err == nil {
			name = unescaped
		}
		if strings.Contains(strings.ToLower(name), "secret") {
			pairs[i] = name + "=xxxxx"
		}
	}
	u.RawQuery = strings.Join(pairs, "&")
	return u.Redacted()
}

// location is a parsed blob URL.
type location struct {
	scheme string    // "file", "mem" or "s3"
	dir    string    // file: the directory, as written
	s3     s3.Config // s3: the config, validated
}

// parseURL parses a blob URL (see Open) without touching the world.
func parseURL(rawURL string) (location, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return location{}, fmt.Errorf(`%w: no "SCHEME://"; want file://DIR, s3://BUCKET/PREFIX or mem://`, ErrInvalidURL)
	}
	switch scheme = strings.ToLower(scheme); scheme {
	case "mem":
		if rest != "" {
			return location{}, fmt.Errorf("%w: mem:// takes no path or parameters", ErrInvalidURL)
		}
		return location{scheme: scheme}, nil
	case "file":
		return parseFile(rest)
	case "s3":
		return parseS3(rawURL)
	default:
		return location{}, fmt.Errorf("%w: scheme %q: want file, s3 or mem", ErrInvalidURL, scheme)
	}
}

// parseFile parses what follows "file://": a path, absolute when it starts
// with '/', percent-escapes decoded.
func parseFile(rest string) (location, error) {
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		return location{}, fmt.Errorf("%w: file://: a directory takes no %q part (escape it as %%%X)", ErrInvalidURL, rest[i], rest[i])
	}
	dir, err := url.PathUnescape(rest)
	if err != nil {
		return location{}, fmt.Errorf("%w: file://: %v", ErrInvalidURL, err)
	}
	if dir == "" {
		return location{}, fmt.Errorf("%w: file://: no directory; want file:///abs/dir or file://relative/dir", ErrInvalidURL)
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return location{}, fmt.Errorf("%w: file://: directory contains NUL", ErrInvalidURL)
	}
	return location{scheme: "file", dir: dir}, nil
}

// parseS3 parses an s3:// URL into a validated s3.Config. Its errors never
// quote the URL, which may carry a secret.
func parseS3(rawURL string) (location, error) {
	bad := func(format string, args ...any) (location, error) {
		return location{}, fmt.Errorf("%w: s3://: %s", ErrInvalidURL, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error quotes the whole URL
		}
		return bad("%v", err)
	}
	if u.User != nil {
		return bad("credentials go in the access_key_id and secret_access_key parameters, not before the bucket")
	}
	if u.Fragment != "" {
		return bad("a '#' part is not allowed")
	}
	if u.Opaque != "" {
		return bad("want s3://BUCKET/PREFIX")
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("malformed parameters")
	}
	cfg := s3.Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	for name, values := range query {
		if !slices.Contains(s3Params, name) {
			return bad("unknown parameter %q; known: %s", name, strings.Join(s3Params, ", "))
		}
		if len(values) != 1 {
			return bad("parameter %s given %d times", name, len(values))
		}
	}
	cfg.Endpoint = query.Get("endpoint")
	cfg.Region = query.Get("region")
	cfg.AccessKeyID = query.Get("access_key_id")
	cfg.SecretAccessKey = query.Get("secret_access_key")
	if v := query.Get("path_style"); v != "" {
		if cfg.PathStyle, err = strconv.ParseBool(v); err != nil {
			return bad("path_style=%q: want true or false", v)
		}
	}
	for _, size := range []struct {
		name string
		dst  *int64
	}{
		{"multipart_threshold", &cfg.MultipartThreshold},
		{"multipart_part_size", &cfg.MultipartPartSize},
	} {
		if v := query.Get(size.name); v != "" {
			if *size.dst, err = strconv.ParseInt(v, 10, 64); err != nil {
				return bad("%s=%q: want a number of bytes", size.name, v)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return location{}, fmt.Errorf("%w: s3://: %w", ErrInvalidURL, err)
	}
	return location{scheme: "s3", s3: cfg}, nil
}
