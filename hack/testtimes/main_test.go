package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"x/a"}`,
		`{"Action":"run","Package":"x/a","Test":"TestOne"}`,
		`{"Action":"output","Package":"x/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}`,
		`{"Action":"output","Package":"x/a","Test":"TestOne","Output":"--- PASS: TestOne (3.50s)\n"}`,
		`{"Action":"pass","Package":"x/a","Test":"TestOne","Elapsed":3.5}`,
		`{"Action":"run","Package":"x/a","Test":"TestTwo/sub"}`,
		`{"Action":"output","Package":"x/a","Test":"TestTwo/sub","Output":"    --- FAIL: TestTwo/sub (9.25s)\n"}`,
		`{"Action":"fail","Package":"x/a","Test":"TestTwo/sub","Elapsed":9.25}`,
		`{"Action":"output","Package":"x/a","Output":"ok  \tx/a\t12.800s\n"}`,
		`{"Action":"pass","Package":"x/a","Elapsed":12.8}`,
		`# x/b`,
		`{"Action":"output","Package":"x/c","Output":"?   \tx/c\t[no test files]\n"}`,
		`{"Action":"skip","Package":"x/c","Elapsed":0}`,
		`{"Action":"run","Package":"x/d","Test":"TestHangs"}`,
		`{"Action":"output","Package":"x/d","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}`,
		`{"Action":"output","Package":"x/d","Test":"TestHangs","Output":"panic: test timed out after 1s\n"}`,
		`{"Action":"output","Package":"x/d","Output":"FAIL\tx/d\t1.0s\n"}`,
		`{"Action":"fail","Package":"x/d","Elapsed":1}`,
		`{"Action":"run","Package":"x/e","Test":"TestCut"}`,
		`{"Action":"output","Package":"x/e","Test":"TestCut","Output":"=== RUN   TestCut\n"}`,
	}, "\n")
	var out bytes.Buffer
	pkgs, tests, err := summarize(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "    --- FAIL: TestTwo/sub (9.25s)\nok  \tx/a\t12.800s\n# x/b\n?   \tx/c\t[no test files]\n" +
		"=== RUN   TestHangs\npanic: test timed out after 1s\nFAIL\tx/d\t1.0s\n=== RUN   TestCut\n"
	if out.String() != want {
		t.Errorf("output:\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	report(&out, pkgs, tests, 1)
	want = "--- where the time went (wall seconds)\n     12.8  pass x/a\n      1.0  fail x/d\n--- the 1 slowest tests\n      9.2  fail x/a TestTwo/sub\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant\n%s", out.String(), want)
	}
}
