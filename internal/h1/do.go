package h1

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Do sends req and returns what an http.Client over t with no cookie jar,
// no timeout and a CheckRedirect returning http.ErrUseLastResponse would
// return: a redirect is the response, not followed. The response body
// must be closed.
//
// It hands req to t without the client, which for such a client would only
// copy headers for redirects it never follows (BENCHMARKS.md). What
// Client.Do does besides is done here the same way, so callers that look
// at errors see no difference (TestDoAnswersAsClientDo): errors are
// wrapped in the same *url.Error, a TLS handshake answered in plain HTTP
// becomes http.ErrSchemeMismatch, and a redirect Client.Do would look at
// whose Location does not parse is an error, not a response. A URL with
// user information, which Client.Do turns into Basic authentication, goes
// through such a client.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.User != nil {
		return t.client.Do(req)
	}
	uerr := func(err error) error {
		return &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
	}
	resp, err := t.RoundTrip(req) // closes the request body, as Client.Do relies on
	if err != nil {
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		return nil, uerr(err)
	}
	if loc := resp.Header.Get("Location"); loc != "" && clientWouldRedirect(req, resp.StatusCode) {
		if _, err := req.URL.Parse(loc); err != nil {
			resp.Body.Close()
			return nil, uerr(fmt.Errorf("failed to parse Location header %q: %v", loc, err))
		}
	}
	return resp, nil
}

// clientWouldRedirect reports whether http.Client would treat an answer
// with this status to req as a redirect to follow (and so parse its
// Location before asking CheckRedirect): 301, 302 and 303 always; 307 and
// 308 only when the body can be sent again: GetBody set, or no body.
func clientWouldRedirect(req *http.Request, status int) bool {
	switch status {
	case 301, 302, 303:
		return true
	case 307, 308:
		return req.GetBody != nil || req.Body == nil || req.Body == http.NoBody
	}
	return false
}

// urlErrorOp is the Op of the *url.Error Client.Do returns: the method
// with all but its first letter in lower case ("Post"), "Get" when empty,
// unchanged when it is not printable ASCII.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	for i := 0; i < len(method); i++ {
		if method[i] < 0x20 || method[i] > 0x7e {
			return method
		}
	}
	return method[:1] + strings.ToLower(method[1:])
}
