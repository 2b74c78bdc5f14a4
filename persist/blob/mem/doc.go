// Package mem is an in-memory persist.Blob for unit tests and for the
// `mem://` blob URL: a map of keys to values behind one mutex.
//
// Set and Get copy the value, so a caller that reuses its buffer after Set,
// or scribbles on what Get returned, cannot change the stored object; that
// is the aliasing bug an in-memory fake would otherwise hide and a real
// backend would expose.
//
// Keys follow the same grammar as the file and S3 Blobs (see
// persist/blob.ErrInvalidKey), so code tested here meets no surprise there.
//
// List copies the matching keys under the lock and calls fn without it, so
// fn may call back into the Blob, as the garbage collector does when it
// deletes what it lists:
//
//	err := b.List(ctx, "s0123/", func(m persist.BlobMeta) error {
//		_, err := b.Delete(ctx, m.Key)
//		return err
//	})
//
// Every operation takes the mutex, so all of them are linearizable. Nothing
// survives the process; Close is a no-op.
package mem
