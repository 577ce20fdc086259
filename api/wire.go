package api

import (
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/strictjson"
)

// WireHeader is a header line in admin API JSON.
type WireHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// WireEnqueue is the admin API's enqueue request body.
type WireEnqueue struct {
	Method           string       `json:"method,omitempty"`
	URL              string       `json:"url"`
	Headers          []WireHeader `json:"headers,omitempty"`
	Body             []byte       `json:"body,omitempty"` // base64 in JSON
	Key              string       `json:"key,omitempty"`
	KeyFormat        string       `json:"key_format,omitempty"`
	StatusURL        string       `json:"status_url,omitempty"`
	KeyTTL           Duration     `json:"key_ttl,omitempty"`
	MaxAttempts      int          `json:"max_attempts,omitempty"`
	Deadline         Duration     `json:"deadline,omitempty"`
	AttemptTimeout   Duration     `json:"attempt_timeout,omitempty"`
	ReplaySafe       bool         `json:"replay_safe,omitempty"`
	NoEffectStatuses []int        `json:"no_effect_statuses,omitempty"`
	RunAt            time.Time    `json:"run_at,omitzero"` // RFC 3339; zero: now
}

func toWire(req Request, o EnqueueOptions) WireEnqueue {
	w := WireEnqueue{Method: req.Method, URL: req.URL, Body: req.Body, Key: o.Key, StatusURL: o.StatusURL,
		KeyTTL: Duration(o.KeyTTL), MaxAttempts: o.MaxAttempts, Deadline: Duration(o.Deadline),
		AttemptTimeout: Duration(o.AttemptTimeout), ReplaySafe: o.ReplaySafe, NoEffectStatuses: o.NoEffectStatuses, RunAt: o.RunAt}
	if o.KeyFormat != idemkey.FormatToken {
		w.KeyFormat = o.KeyFormat.String()
	}
	for _, h := range req.Header {
		w.Headers = append(w.Headers, WireHeader{h.Name, h.Value})
	}
	return w
}

// Parts returns the request and options the body gives.
func (w WireEnqueue) Parts() (Request, EnqueueOptions, error) {
	req := Request{Method: w.Method, URL: w.URL, Body: w.Body}
	for _, h := range w.Headers {
		req.Header = append(req.Header, Header{Name: h.Name, Value: h.Value})
	}
	o := EnqueueOptions{Key: w.Key, StatusURL: w.StatusURL, KeyTTL: time.Duration(w.KeyTTL), MaxAttempts: w.MaxAttempts,
		Deadline: time.Duration(w.Deadline), AttemptTimeout: time.Duration(w.AttemptTimeout), ReplaySafe: w.ReplaySafe,
		NoEffectStatuses: w.NoEffectStatuses, RunAt: w.RunAt}
	if w.KeyFormat != "" {
		f, err := idemkey.ParseFormat(w.KeyFormat)
		if err != nil {
			return req, o, invalid("key_format", w.KeyFormat, "token or structured")
		}
		o.KeyFormat = f
	}
	return req, o, nil
}

// DecodeEnqueue decodes an admin enqueue body, refusing unknown fields,
// trailing data and anything encoding/json would change on the way (bytes
// that are not UTF-8, lone surrogate escapes, a field given twice): a
// request is stored as its author wrote it.
func DecodeEnqueue(b []byte) (WireEnqueue, error) {
	var w WireEnqueue
	if err := strictjson.Decode(b, &w); err != nil {
		return w, &InvalidError{Field: "request body", Value: "(JSON)", Accepted: err.Error()}
	}
	return w, nil
}
