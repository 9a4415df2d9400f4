package messaging

import "unicode/utf8"

// Clip shortens s to at most n bytes, ending on valid UTF-8.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:max(n, 0)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
