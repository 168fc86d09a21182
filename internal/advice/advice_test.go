package advice

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"testing"
)

// TestStringRunsAsTheArgv: the line a person pastes into sh gives the
// program exactly the argv a script runs, whatever the words hold.
func TestStringRunsAsTheArgv(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"plain", "with space", "it's", `back\slash`, "$HOME", "*", "", "a;b", "--gate=/x y", "ünï", "tab\there", "new\nline"}
	c := Program("printf", append([]string{`%s\0`}, words...)...)
	out, err := exec.Command(sh, "-c", c.String()).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", c.String(), err)
	}
	var got []string
	for len(out) > 0 {
		i := 0
		for out[i] != 0 {
			i++
		}
		got = append(got, string(out[:i]))
		out = out[i+1:]
	}
	if !reflect.DeepEqual(got, words) {
		t.Fatalf("sh ran %q\ngot  %q\nwant %q", c.String(), got, words)
	}
}

func TestJSONKeepsArgvAndLine(t *testing.T) {
	c := Plugin("slot", "destroy", "b", "--yes").With("--gate", "/a b/gate.yaml")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"argv":["kubectl","bundle-slot","destroy","b","--yes","--gate","/a b/gate.yaml"],"line":"kubectl bundle-slot destroy b --yes --gate '/a b/gate.yaml'"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back Cmd
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v %#v", err, back)
	}
	if !c.Has("--yes") || c.Has("kubectl") || c.Has("--force") {
		t.Fatalf("Has: %v %v %v", c.Has("--yes"), c.Has("kubectl"), c.Has("--force"))
	}
	if z, _ := json.Marshal(Cmd{}); string(z) != `{"argv":[],"line":""}` || !(Cmd{}).IsZero() {
		t.Fatalf("zero: %s", z)
	}
}

func TestEnvRendersFirst(t *testing.T) {
	c := Plugin("journal", "end").WithEnv("KUBECTL_BUNDLE_STATE_DIR=/srv/site state")
	if got, want := c.String(), "KUBECTL_BUNDLE_STATE_DIR='/srv/site state' kubectl bundle-journal end"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if (Cmd{}).WithEnv("A=b").IsZero() != true || c.WithEnv("").String() != c.String() {
		t.Fatal("WithEnv on nothing, or of nothing, changed the command")
	}
	b, _ := json.Marshal(c)
	var back Cmd
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v %#v", err, back)
	}
}
