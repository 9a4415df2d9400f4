// Package handlers holds Isle's consumers, one per file: a type, its
// constructor, Handle(ctx, msg) error, and the narrow interface it needs from
// the store. Decoding, retry, dead-lettering and panic recovery are
// middleware around them, so a handler only says what its message means.
package handlers
