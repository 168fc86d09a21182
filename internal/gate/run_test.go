package gate

import "testing"

// TestCutByDeadline: an evaluation whose request client-go's rate limiter
// refused because its wait would pass the run's deadline was cut off (the
// previous complete result stands); a real failure, even a timeout of one
// request, was not. Seen under load: TestTimeoutReportsLastState reported
// "fi: Error ... client rate limiter Wait returned an error: rate: Wait(n=1)
// would exceed context deadline" where the cluster said NotFound.
func TestCutByDeadline(t *testing.T) {
	for _, c := range []struct {
		results []Result
		want    bool
	}{
		{[]Result{pass("a", ""), fail("FluxInstance x/flux", "Error", "reading FluxInstance x/flux: client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")}, true},
		{[]Result{fail("FluxInstance x/flux", "NotFound", "not found")}, false},
		{[]Result{fail("Deployment x/y", "Error", "reading Deployment x/y: Get \"https://10.0.0.1/apis\": context deadline exceeded")}, false},
		{nil, false},
	} {
		if got := cutByDeadline(c.results); got != c.want {
			t.Errorf("cutByDeadline(%v) = %t, want %t", c.results, got, c.want)
		}
	}
}
