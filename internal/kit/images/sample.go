package images

import (
	"bytes"
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"math"
	"math/rand/v2"
)

// MinPNGSize is the size of the smallest PNG that SamplePNG makes: one
// grey pixel.
const MinPNGSize = 70

// maxStored is the most bytes one stored (uncompressed) deflate block holds.
const maxStored = 65535

// SamplePNG returns a valid PNG of exactly max(size, MinPNGSize) bytes: a
// square of grey noise drawn from seed, padded to size by a private
// ancillary chunk ("isLe", which decoders skip). Equal arguments give
// equal bytes; another seed gives other bytes. For demos, loads and tests
// that upload images of a chosen size.
func SamplePNG(size int, seed uint64) []byte {
	size = max(size, MinPNGSize)
	rnd := rand.New(rand.NewPCG(seed, 0x15e))
	w, h, pad := layout(size)
	raw := make([]byte, 0, h*(w+1))
	for range h {
		raw = append(raw, 0) // filter: none
		for range w {
			raw = append(raw, byte(rnd.Uint32()))
		}
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 0, 0, 0, 0) // 8-bit greyscale, deflate, adaptive filtering, no interlace
	chunk(&b, "IHDR", ihdr)
	chunk(&b, "IDAT", stored(raw))
	if pad >= 0 {
		filler := make([]byte, pad)
		for i := range filler {
			filler[i] = byte(rnd.Uint32())
		}
		chunk(&b, "isLe", filler)
	}
	chunk(&b, "IEND", nil)
	return b.Bytes()
}

// pngSize is the size of a w×h greyscale PNG made by SamplePNG without
// padding: signature, IHDR, IDAT of stored blocks, IEND.
func pngSize(w, h int) int {
	raw := h * (w + 1)
	blocks := max(1, (raw+maxStored-1)/maxStored)
	return 8 + 25 + 12 + 2 + 5*blocks + raw + 4 + 12
}

// layout picks the largest square whose PNG leaves room for the padding
// chunk (12 bytes and its data), and the padding's length; pad is -1 for
// no padding chunk, when a single row fills size exactly.
func layout(size int) (w, h, pad int) {
	for n := int(math.Sqrt(float64(size))); n >= 1; n-- {
		if rest := size - pngSize(n, n); rest >= 12 {
			return n, n, rest - 12
		}
	}
	// Too small to pad: one row whose width fills it (size ≥ MinPNGSize).
	return size - pngSize(0, 1), 1, -1
}

// stored is raw as a zlib stream of stored (uncompressed) deflate blocks.
func stored(raw []byte) []byte {
	sum := adler32.Checksum(raw)
	out := []byte{0x78, 0x01} // deflate, 32K window, no dictionary; the check bits hold
	for first := true; first || len(raw) > 0; first = false {
		n := min(len(raw), maxStored)
		final := byte(0)
		if n == len(raw) {
			final = 1
		}
		out = append(out, final)
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, raw[:n]...)
		raw = raw[n:]
	}
	return binary.BigEndian.AppendUint32(out, sum)
}

// chunk writes one PNG chunk: length, type, data, CRC of type and data.
func chunk(b *bytes.Buffer, typ string, data []byte) {
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(data))))
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	b.WriteString(typ)
	b.Write(data)
	b.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
}
