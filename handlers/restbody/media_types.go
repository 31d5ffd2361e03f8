package restbody

// The media types of REST request bodies.
const (
	MediaTypeJSON       = "application/json"
	MediaTypeMergePatch = "application/merge-patch+json" // RFC 7396
)
