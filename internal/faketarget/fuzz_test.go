package faketarget

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/idemkey"
)

// FuzzStatusKeyRoundTrip checks that every key idemkey accepts, sent in
// either header format, is created once under that exact key and is found
// again through its URL-escaped status path.
func FuzzStatusKeyRoundTrip(f *testing.F) {
	for _, k := range []string{"a/b", "..", "x?y#z", "%2F", `q"\`, "a;b=c"} {
		f.Add(k, true)
		f.Add(k, false)
	}
	f.Fuzz(func(t *testing.T, key string, structured bool) {
		if idemkey.Validate(key) != nil {
			return
		}
		s := New(Config{Dedup: true})
		defer s.Close()
		format := idemkey.FormatToken
		if structured {
			format = idemkey.FormatStructured
		}
		for i := range 2 {
			req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`))
			req.Header.Set(idemkey.HeaderName, idemkey.FormatHeader(key, format))
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				t.Fatalf("POST %d of key %q: got %d %q, want 201", i, key, rec.Code, rec.Body)
			}
			if p := decodePayment(t, rec.Body.Bytes()); p.Key != key {
				t.Fatalf("payment key: got %q, want %q", p.Key, key)
			}
		}
		if got := s.CreatesByKey(); len(got) != 1 || got[key] != 1 {
			t.Fatalf("CreatesByKey: got %v, want only %q once", got, key)
		}
		req := httptest.NewRequest(http.MethodGet, statusPrefix+url.PathEscape(key), nil)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if a := decodeStatus(t, rec.Body.Bytes()); rec.Code != http.StatusOK || a.Key != key {
			t.Fatalf("status of %q: got %d %+v, want 200 with the key", key, rec.Code, a)
		}
	})
}
