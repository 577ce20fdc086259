package statusquery_test

import (
	"net"
	"net/http"
)

// startExampleServer serves h on 127.0.0.1 and returns its address. Examples
// cannot take a *testing.T, so it panics on failure.
func startExampleServer(h http.HandlerFunc) (addr string, srv *http.Server) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv = &http.Server{Handler: h}
	go srv.Serve(ln)
	return ln.Addr().String(), srv
}
