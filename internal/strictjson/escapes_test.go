package strictjson_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/internal/strictjson"
)

// Random strings of escapes: Check refuses exactly those whose decoded
// value holds a U+FFFD not written as such.
func TestSurrogatesAgreeWithDecoder(t *testing.T) {
	parts := []string{`\\`, `\u`, `\ud800`, `\udbff`, `\udc00`, `\udfff`, `\u0041`, `a`, `u`, `\"`, `\n`, `D800`, `\uD83D\uDE00`}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b strings.Builder
		b.WriteString(`{"k":"`)
		for range r.IntN(6) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		b.WriteString(`"}`)
		text := b.String()
		var v map[string]string
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			continue
		}
		changed := strings.ContainsRune(v["k"], '\uFFFD')
		err := strictjson.Check([]byte(text))
		if changed != (err != nil) {
			t.Fatalf("%s: decoded %q, Check: %v", text, v["k"], err)
		}
	}
}

func TestEscapedKeys(t *testing.T) {
	for text, dup := range map[string]bool{
		`{"\u0075rl":1,"url":2}`:              true,
		`{"a":{"\u0055RL":1,"url":2}}`:        true,
		`{"\\u0075rl":1,"url":2}`:             false,
		`{"k":"\\\\u","k2":"\\\ud83d\ude00"}`: false,
	} {
		if err := strictjson.Check([]byte(text)); (err != nil) != dup {
			t.Errorf("%s: %v", text, err)
		}
	}
}
