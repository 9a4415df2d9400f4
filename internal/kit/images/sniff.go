package images

import (
	"net/http"
	"path"
	"slices"
	"strings"
)

// The media types Sniff recognises.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// SniffLen is how many first bytes Sniff needs at most.
const SniffLen = 512

// extensions are the file name extensions of each type, lower case, the
// usual one first.
var extensions = map[string][]string{
	PNG:  {".png"},
	JPEG: {".jpg", ".jpeg"},
	GIF:  {".gif"},
	WebP: {".webp"},
}

// Sniff returns the media type of the image whose first bytes are head
// (up to SniffLen of them), by its signature, as http.DetectContentType
// reads it; "" when head starts no PNG, JPEG, GIF or WebP. Only the
// signature is read: a body that starts like an image and goes on as
// something else is still served with the image's type, which a browser
// told X-Content-Type-Options: nosniff never renders as anything else.
func Sniff(head []byte) string {
	t := http.DetectContentType(head[:min(len(head), SniffLen)])
	if _, ok := extensions[t]; ok {
		return t
	}
	return ""
}

// Extensions are the file name extensions of mediaType ("" for a type
// Sniff does not return).
func Extensions(mediaType string) []string { return slices.Clone(extensions[mediaType]) }

// NameFits reports whether a file name suits mediaType: it has no
// extension, or one of the type's (in any case). A name ending in ".html"
// never names a PNG, so no server that types files by their extension
// serves it as a page.
func NameFits(name, mediaType string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == "" || slices.Contains(extensions[mediaType], ext)
}
