package images_test

import (
	"bytes"
	"image"
	"image/gif"
	"image/jpeg"
	"testing"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/stretchr/testify/require"
)

func encoded(t *testing.T, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, enc(&b, image.NewGray(image.Rect(0, 0, 2, 2))))
	return b.Bytes()
}

func TestSniffReadsTheSignatureNotTheName(t *testing.T) {
	t.Parallel()
	jpg := encoded(t, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) })
	gf := encoded(t, func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) })
	webp := []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"png", images.SamplePNG(100, 1), images.PNG},
		{"jpeg", jpg, images.JPEG},
		{"gif", gf, images.GIF},
		{"webp", webp, images.WebP},
		{"png signature then a page", append(images.SamplePNG(70, 1)[:8:8], "<script>alert(1)</script>"...), images.PNG},
		{"html", []byte("<!DOCTYPE html><script>alert(1)</script>"), ""},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), ""},
		{"bmp", []byte("BM\x00\x00\x00\x00\x00\x00\x00\x00"), ""},
		{"text", []byte("not really a png"), ""},
		{"zeros", make([]byte, 600), ""},
		{"empty", nil, ""},
	} {
		require.Equal(t, c.want, images.Sniff(c.body), c.name)
	}
}

func TestNameFitsItsType(t *testing.T) {
	t.Parallel()
	require.True(t, images.NameFits("me.png", images.PNG))
	require.True(t, images.NameFits("ME.PNG", images.PNG))
	require.True(t, images.NameFits("avatar", images.PNG), "no extension")
	require.True(t, images.NameFits("a.jpeg", images.JPEG))
	require.True(t, images.NameFits("a.jpg", images.JPEG))
	require.False(t, images.NameFits("x.html", images.PNG))
	require.False(t, images.NameFits("x.png.html", images.PNG))
	require.False(t, images.NameFits("x.jpg", images.PNG))
	require.False(t, images.NameFits("x.svg", images.GIF))
	require.Equal(t, []string{".jpg", ".jpeg"}, images.Extensions(images.JPEG))
	require.Empty(t, images.Extensions("text/html"))
}
