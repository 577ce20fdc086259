package main

import "github.com/idemrun/idemrun/api"

// actor names who a manual action (cancel, retry, resolve) records, by
// api.ActorFrom's rules over this Main's environment.
func (m *Main) actor() string { return api.ActorFrom(m.Getenv) }
