// Package objstore keeps objects (avatars, wallpapers, identity material)
// in stores chosen by URL: a local directory (file:///abs/dir) or an
// S3-compatible bucket (s3://bucket?endpoint=host:port&region=r&secure=true).
// It owns streaming uploads with a size limit and a SHA-256 computed on the
// way, the object URLs written to MySQL (stored_object.source_url,
// replica_url) and the way back from such a URL to a store and a key, which
// the replication consumer needs (doc/objects.md). It knows nothing else of Isle.
//
// Every store streams: an object is never held whole in memory. A Put over
// the limit, or whose reader disagrees with the size it declared, leaves
// nothing stored under the key: the directory store writes a temporary file
// and renames it, the S3 store aborts the multipart upload (S3 itself never
// shows a PUT that did not complete). doc/objects.md has the URL forms and
// limits.
package objstore
