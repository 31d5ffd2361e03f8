package plainjson

import (
	"encoding/json"
	"testing"
)

func TestMarshalKeepsHTMLCharactersAndMatchesEncodingJSON(t *testing.T) {
	v := map[string]any{"error": `x-api-key "<token>" & more`, "raw": json.RawMessage(`{"a":"<b>"}`), "n": 1}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":"x-api-key \"<token>\" & more","n":1,"raw":{"a":"<b>"}}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var back, fromStd map[string]any
	std, _ := json.Marshal(v)
	if json.Unmarshal(got, &back) != nil || json.Unmarshal(std, &fromStd) != nil || back["error"] != fromStd["error"] {
		t.Fatalf("%s and encoding/json's %s decode differently", got, std)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("a value JSON cannot hold encoded without an error")
	}
}
