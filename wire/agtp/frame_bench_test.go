package agtp

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkReadRequest parses a typical RCNS request (eight headers and a
// small JSON body) and, as the baseline measured in the same run, the same
// frame spelt as HTTP/1.1 through net/http's ReadRequest. It reports
// "x-of-nethttp": our time per frame as a multiple of the standard
// library's. The goal is a parser that costs no more than net/http's on the
// same bytes (a ratio at or below about 1).
func BenchmarkReadRequest(b *testing.B) {
	body := `{"endpoint":{"method":"BOOK","path":"/room/{id}"},"persistent":false}`
	headers := "Agent-ID: 9f2c4e7a1b3d5f60718293a4b5c6d7e8f9012345678901234567890abcdef12\r\n" +
		"Allow-RCNS: true\r\nIdempotency-Key: k-1\r\nSession-Id: s-1\r\n" +
		"Principal-Id: p-1\r\nAuthority-Scope: rooms:write rcns:negotiate\r\n" +
		"Content-Type: application/agtp+json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	agtpFrame := []byte("AGTP/1.0 BOOK /room/42\r\n" + headers)
	httpFrame := []byte("POST /room/42 HTTP/1.1\r\nHost: h\r\n" + headers)
	lim := DefaultLimits()

	const baselineRuns = 20000
	rd := bufio.NewReader(nil)
	start := time.Now()
	for i := 0; i < baselineRuns; i++ {
		rd.Reset(bytes.NewReader(httpFrame))
		req, err := http.ReadRequest(rd)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(req.Body)
		if err != nil || len(got) != len(body) {
			b.Fatal("net/http read the body short", err)
		}
	}
	perStd := time.Since(start) / baselineRuns

	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rd.Reset(bytes.NewReader(agtpFrame))
		req, err := ReadRequest(rd, lim)
		if err != nil || len(req.Body) != len(body) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if per := b.Elapsed() / time.Duration(b.N); perStd > 0 {
		b.ReportMetric(float64(per)/float64(perStd), "x-of-nethttp")
	}
}
