package messaging

import "unicode/utf8"

// Clip shortens s to at most n bytes without splitting the last UTF-8
// sequence: it backs off only a rune the cut would leave partial. Invalid
// bytes before the cut are kept as they are; only the cut itself matters.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
