// Package redact hides credentials in what idemrun shows: headers and URLs in
// the CLI and the admin API, log lines, and error texts that might echo a
// header value.
//
// A Redactor knows which header names and query parameter names are
// sensitive (DefaultHeaders and DefaultParams plus any extras, compared
// without regard to case, and any name the name rules of names.go find a
// credential's by its words). It replaces their values with Placeholder and
// leaves everything else as it was, so a redacted request still reads like
// the original. A nil *Redactor behaves as New(nil, nil).
//
// Redaction is for display only: the stored request is never changed, since
// every attempt must send the same bytes.
package redact
