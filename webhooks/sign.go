// Package webhooks sends the change log of users to other systems' endpoints: the rules of
// subscriptions (the Webhooks RPC service), and the engine that delivers each subscription's
// changes in order, signed as Standard Webhooks 1.0 says, in CloudEvents 1.0 bodies, retrying with
// backoff. It reads the change log through the store and knows nothing of HTTP routing: the faces
// mount its service.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secretPrefix begins every signing secret, as Standard Webhooks writes them.
const secretPrefix = "whsec_"

// secretBytes is the length of a secret's key: 256 bits, the size of HMAC-SHA256's output.
const secretBytes = 32

// newSecret makes a signing secret: whsec_ and the base64 of a random key.
func newSecret() string {
	key := make([]byte, secretBytes)
	rand.Read(key) // never fails: crypto/rand panics rather than return a short key
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// secretKey is the key of a secret that newSecret made.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return nil, fmt.Errorf("a signing secret is not base64 after %s: %w", secretPrefix, err)
	}
	return key, nil
}

// signature is the value of the webhook-signature header of a message: "v1," and the base64 of
// HMAC-SHA256 over "id.timestamp.body", under each secret's key, separated by spaces (more than
// one while a rotated secret still signs beside the new one).
func signature(id string, at time.Time, body []byte, secrets ...string) (string, error) {
	var out []string
	for _, secret := range secrets {
		key, err := secretKey(secret)
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
		mac.Write(body)
		out = append(out, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(out, " "), nil
}
