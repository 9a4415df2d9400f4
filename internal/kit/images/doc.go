// Package images recognises the image formats Isle stores as avatars and
// wallpapers (PNG, JPEG, GIF, WebP) by their first bytes, never by what a
// client says they are, and makes valid sample PNGs of any size for demos,
// loads and tests. It knows nothing of kinds or stores: the API decides
// which formats each kind takes (internal/service/httpapi, objects.go).
package images
