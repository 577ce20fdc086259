package idemkey_test

import (
	"fmt"
	"net/http"

	"github.com/idemrun/idemrun/idemkey"
)

func ExampleNew() {
	key := idemkey.New()
	fmt.Println(len(key), idemkey.Validate(key))
	// Output: 36 <nil>
}

func ExampleValidate() {
	fmt.Println(idemkey.Validate("ab c"))
	// Output: idemkey: invalid key "ab c": contains a space at byte 2; accepted: 1-255 printable ASCII characters (0x21-0x7E), no spaces or control characters, not starting with a double quote
}

func ExampleFormatHeader() {
	key := `order-42"b`
	fmt.Println(idemkey.HeaderName+":", idemkey.FormatHeader(key, idemkey.FormatToken))
	fmt.Println(idemkey.HeaderName+":", idemkey.FormatHeader(key, idemkey.FormatStructured))
	back, err := idemkey.ParseHeader(idemkey.FormatHeader(key, idemkey.FormatStructured))
	fmt.Println(back, err)
	// Output:
	// Idempotency-Key: order-42"b
	// Idempotency-Key: "order-42\"b"
	// order-42"b <nil>
}

func ExampleFingerprint() {
	h := http.Header{"Content-Type": {"application/json"}}
	a := idemkey.Fingerprint("POST", "https://api.example.com/v1/payments", h, []byte(`{"amount":100}`))
	h.Set("Authorization", "Bearer rotated-token") // credentials do not define the request
	b := idemkey.Fingerprint("post", "https://api.example.com/v1/payments", h, []byte(`{"amount":100}`))
	c := idemkey.Fingerprint("POST", "https://api.example.com/v1/payments", h, []byte(`{"amount":101}`))
	fmt.Println(a == b, a == c)
	// Output: true false
}
