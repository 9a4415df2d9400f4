package images_test

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/stretchr/testify/require"
)

// Every size gives a PNG of exactly that size that the standard library
// decodes, and Sniff calls a PNG.
func TestSamplePNGIsAValidPNGOfTheSizeAsked(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, images.MinPNGSize, 71, 80, 81, 82, 83, 100, 1000, 4096, 65_600, 131_100, 200_000, 1 << 20}
	for n := 70; n < 400; n++ {
		sizes = append(sizes, n)
	}
	for _, size := range sizes {
		b := images.SamplePNG(size, uint64(size))
		require.Len(t, b, max(size, images.MinPNGSize), "size %d", size)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, "size %d", size)
		require.Positive(t, img.Bounds().Dx(), "size %d", size)
		require.Equal(t, images.PNG, images.Sniff(b))
	}
	again := images.SamplePNG(5000, 1)
	require.Equal(t, images.SamplePNG(5000, 1), again, "the same size and seed draw the same picture")
	require.NotEqual(t, images.SamplePNG(5000, 1), images.SamplePNG(5000, 2))
}
