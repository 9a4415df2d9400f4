package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxKeyBytes is the longest key, S3's limit. MySQL bounds it further:
	// stored_object.object_key is VARCHAR(255) and the URLs VARCHAR(1024).
	MaxKeyBytes = 1024
	// MaxSegmentBytes is the longest segment, a file name on Linux.
	MaxSegmentBytes = 255
)

// ValidKey reports whether key can name an object in every store, so that an
// object replicates between any two. A key is 1 to MaxKeyBytes bytes of
// valid UTF-8, a sequence of '/'-separated segments of at most
// MaxSegmentBytes, none of them empty (no leading, trailing or doubled
// '/'), "." or "..", and holds no control
// character (NUL and the other C0 codes, DEL) and no backslash, which
// filesystems and S3 tools read differently. A bad key gives ErrBadKey.
func ValidKey(key string) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("%w %q: %s", ErrBadKey, key, err)
	}
	return nil
}

func validKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%d bytes, over %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("not valid UTF-8")
	}
	for _, c := range key {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character %U", c)
		}
		if c == '\\' {
			return fmt.Errorf("backslash")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("empty segment (leading, trailing or doubled '/')")
		case ".", "..":
			return fmt.Errorf("segment %q", seg)
		}
		if len(seg) > MaxSegmentBytes {
			return fmt.Errorf("a segment of %d bytes, over %d", len(seg), MaxSegmentBytes)
		}
	}
	return nil
}
