package blobkey

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxKeyLen is S3's limit on object key length, in bytes. It applies to
	// the key as persist sees it, before a backend adds its own prefix.
	MaxKeyLen = 1024
	// MaxSegmentLen is the usual filesystem limit on one name (NAME_MAX).
	MaxSegmentLen = 255
)

// Check returns nil if key is a valid Blob key, else an error wrapping
// ErrInvalid that says which rule it breaks. The error quotes the key: keys
// are persist's own names (shard ids, versions, uuids), never secrets.
func Check(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	if err := checkBytes(key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

// CheckPrefix returns nil if prefix is a valid List prefix: "" or a key whose
// last segment may be partial or empty ("a/", "a/b", "a/.").
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkBytes(prefix); err != nil {
		return err
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return nil
	}
	if i == 0 {
		return fmt.Errorf("%w: %q: leading '/'", ErrInvalid, prefix)
	}
	// The complete segments are a directory path; they obey the key rules.
	for seg := range strings.SplitSeq(prefix[:i], "/") {
		if err := checkSegment(prefix, seg); err != nil {
			return err
		}
	}
	return nil
}

// checkBytes applies the rules on the whole string: length, UTF-8, NUL.
func checkBytes(s string) error {
	if len(s) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(s), MaxKeyLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q: not valid UTF-8", ErrInvalid, s)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %q: contains NUL", ErrInvalid, s)
	}
	return nil
}

// checkSegment applies the rules on one complete segment of key.
func checkSegment(key, seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("%w: %q: empty segment (leading, trailing or double '/')", ErrInvalid, key)
	case seg[0] == '.':
		// Covers "." and "..", which would alias or escape a directory, and
		// the file Blob's temporary files, which must never be a key.
		return fmt.Errorf("%w: %q: segment %q starts with '.'", ErrInvalid, key, seg)
	case len(seg) > MaxSegmentLen:
		return fmt.Errorf("%w: %q: segment longer than %d bytes", ErrInvalid, key, MaxSegmentLen)
	}
	return nil
}
