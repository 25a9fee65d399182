package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/runnel/runnel/api"
)

// HTTP compression: Content-Encoding gzip or zstd on request bodies (any
// endpoint; produce is the one that matters), Accept-Encoding on consume
// answers. Decompression is bounded like any body: the decompressed bytes
// go through MaxBodyBytes (413 request-too-large: a zip bomb stops there)
// and the memory budget as they arrive, and the decoder's own memory (a
// zstd window is capped at Limits.MaxZstdWindow) is taken from the budget
// first.

// decoderCost is what a decompressor holds besides its window.
const decoderCost = 1 << 20

// bodyDecoder wraps a request body in the decompressor its
// Content-Encoding names (nil, nil when it has none) and says how much
// memory the decompressor may hold.
func bodyDecoder(r *http.Request, maxWindow int64) (io.ReadCloser, int64, error) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
		return nil, 0, nil
	case "gzip", "x-gzip":
		return &lazyDecoder{maxWindow: maxWindow, open: func() (io.ReadCloser, error) { return gzip.NewReader(r.Body) }}, decoderCost + 64<<10, nil
	case "zstd":
		return &lazyDecoder{maxWindow: maxWindow, open: func() (io.ReadCloser, error) {
			d, err := zstd.NewReader(r.Body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(uint64(maxWindow)))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		}}, decoderCost + maxWindow, nil
	}
	return nil, 0, &api.FieldError{Field: "header.Content-Encoding", Err: api.ErrUnsupportedMedia,
		Msg: fmt.Sprintf("%q; send gzip, zstd or identity", enc)}
}

// lazyDecoder opens its decompressor at the first Read, so a bad stream
// header is a read error (400), reported where the body is read.
type lazyDecoder struct {
	maxWindow int64
	open      func() (io.ReadCloser, error)
	rc        io.ReadCloser
	err       error
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.rc == nil && d.err == nil {
		d.rc, d.err = d.open()
	}
	if errors.Is(d.err, zstd.ErrWindowSizeExceeded) {
		return 0, fmt.Errorf("%w: a zstd window over %d bytes (--http-max-zstd-window)", api.ErrBodyTooLarge, d.maxWindow)
	}
	if d.err != nil {
		return 0, fmt.Errorf("decompressing the body: %w", d.err)
	}
	n, err := d.rc.Read(p)
	switch {
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		err = fmt.Errorf("%w: a zstd window over %d bytes (--http-max-zstd-window)", api.ErrBodyTooLarge, d.maxWindow)
	case err != nil && err != io.EOF:
		err = fmt.Errorf("decompressing the body: %w", err)
	}
	return n, err
}

func (d *lazyDecoder) Close() error {
	if d.rc != nil {
		return d.rc.Close()
	}
	return nil
}

// responseEncoding picks the response Content-Encoding from Accept-Encoding:
// zstd, else gzip, else none (q=0 refuses a coding).
func responseEncoding(r *http.Request) string {
	var gz, zs bool
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if q := strings.ReplaceAll(params, " ", ""); q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "zstd":
				zs = true
			case "gzip", "x-gzip":
				gz = true
			}
		}
	}
	switch {
	case zs:
		return "zstd"
	case gz:
		return "gzip"
	}
	return ""
}

// compressResponse wraps w in the encoder r's Accept-Encoding picks, at
// the fastest level (a consume answer is written once, read once); close
// flushes it. With no encoding it returns w itself.
func compressResponse(w http.ResponseWriter, r *http.Request) (io.Writer, func() error) {
	w.Header().Add("Vary", "Accept-Encoding")
	switch responseEncoding(r) {
	case "zstd":
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return w, func() error { return nil }
		}
		w.Header().Set("Content-Encoding", "zstd")
		w.Header().Del("Content-Length")
		return zw, zw.Close
	case "gzip":
		gw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level never fails
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Del("Content-Length")
		return gw, gw.Close
	}
	return w, func() error { return nil }
}
