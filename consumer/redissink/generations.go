package redissink

import (
	"context"
	"strconv"
	"strings"
)

// cleanupScan is the SCAN COUNT and UNLINK batch of the deletion of an old
// generation: bounded so that Redis serves readers between batches.
const cleanupScan = 1000

// cleanup deletes every generation in the durable list that is neither
// active nor being loaded, then drops it from the list. A generation is put
// on the list (shardtail_claim) before its first key is written, so no key
// escapes; and a generation that is neither active nor claimed never
// becomes either again (generation numbers only grow, and a superseded
// claim is fenced), so deleting it races with no writer. Errors are logged,
// not returned: the list keeps the generation and the next cleanup (every
// Load and every switch) retries.
func (s *Sink) cleanup(ctx context.Context) {
	gens, err := s.rdb.LRange(ctx, s.ctl(keyGenerations), 0, -1).Result()
	if err != nil {
		s.log.Warn("redis sink: list old generations", "err", err)
		return
	}
	vals, err := s.rdb.MGet(ctx, s.ctl(keyActive), s.ctl(keyLoading)).Result()
	if err != nil {
		s.log.Warn("redis sink: read active generation", "err", err)
		return
	}
	active, _ := vals[0].(string)
	loading, _ := vals[1].(string)
	for _, g := range gens {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			continue
		}
		prefix := GenerationPrefix(s.cfg.Namespace, n)
		if prefix == active || g == loading {
			continue
		}
		deleted, err := s.deleteGeneration(ctx, prefix)
		s.deleted.Add(deleted)
		if err != nil {
			s.log.Warn("redis sink: delete old generation", "prefix", prefix, "err", err)
			return
		}
		if err := s.rdb.LRem(ctx, s.ctl(keyGenerations), 0, g).Err(); err != nil {
			s.log.Warn("redis sink: forget old generation", "prefix", prefix, "err", err)
			return
		}
		s.log.Info("redis sink: deleted old generation", "prefix", prefix, "keys", deleted)
	}
}

// deleteGeneration unlinks every key under prefix.
func (s *Sink) deleteGeneration(ctx context.Context, prefix string) (int64, error) {
	var deleted int64
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, globEscape(prefix)+"*", cleanupScan).Result()
		if err != nil {
			return deleted, err
		}
		if len(keys) > 0 {
			n, err := s.rdb.Unlink(ctx, keys...).Result()
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}

// globEscape escapes the characters SCAN MATCH treats as a pattern, so a
// namespace like "a*b:" matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
