package api

import "context"

// RequestBody returns the body a job sends, with the job's own secrets
// (sensitive header values, credential URL parameters) scrubbed from it
// as from its view's texts: Job carries only the body's size. Through a
// runner's admin API it is ErrNotOffered.
func (c *Client) RequestBody(ctx context.Context, idOrKey string) ([]byte, error) {
	if c.rem != nil {
		return nil, c.notOffered("the request body")
	}
	j, err := c.lookup(idOrKey)
	if err != nil {
		return nil, err
	}
	return []byte(c.Scrub(j, string(j.Request.Body))), nil
}
