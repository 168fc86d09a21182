package stage

import (
	"encoding/json"
	"fmt"
)

// RecordFile is the verification record beside each staged package.
const RecordFile = "verification.json"

// Record is verification.json: verify's report plus who verified, when,
// and with what, so that a deploy can hand zarf the same key and a stale
// copy can be staged again with the same command.
type Record struct {
	Report      Report `json:"report"`
	ToolVersion string `json:"toolVersion"`
	StagedAt    string `json:"stagedAt"`
	// Key is the public key file the signature was checked with.
	Key string `json:"key,omitempty"`
	// TrustedRoot is the Sigstore trusted root a keyless signature was
	// checked with.
	TrustedRoot string `json:"trustedRoot,omitempty"`
	// Source is the absolute path of the file that was verified.
	Source string `json:"source,omitempty"`
	// Unsigned is true when the package was staged with
	// --insecure-skip-signature: its integrity was checked, but nobody
	// vouches for it, so a deploy needs --insecure too.
	Unsigned bool `json:"unsigned"`
}

// IsUnsigned reports whether nobody vouches for the package (records of
// earlier versions say so only in the report).
func (r *Record) IsUnsigned() bool {
	return r.Unsigned || r.Report.SignatureSkipped || r.Report.Signer.Method == "none"
}

// Report is verify's report as staged: the facts a staged package is known
// by, typed, while the whole report is kept as verify wrote it.
type Report struct {
	Verified bool   `json:"verified"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Package  struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"package"`
	Signer struct {
		// Method is key, keyless or none.
		Method         string `json:"method"`
		KeyFingerprint string `json:"keyFingerprint,omitempty"`
		Identity       string `json:"identity,omitempty"`
		Issuer         string `json:"issuer,omitempty"`
	} `json:"signer"`
	SignatureSkipped bool `json:"signatureSkipped,omitempty"`
	// DeployActions are the package's commands run at deploy, outside
	// Zarf's record (verify's report).
	DeployActions []struct {
		Component string `json:"component"`
		When      string `json:"when"`
		Cmd       string `json:"cmd"`
	} `json:"deployActions,omitempty"`

	raw json.RawMessage
}

// ReportOf keeps v (verify's report) whole, and reads its facts.
func ReportOf(v any) (Report, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Report{}, fmt.Errorf("encoding the verification report: %w", err)
	}
	var r Report
	if err := r.UnmarshalJSON(b); err != nil {
		return Report{}, err
	}
	return r, nil
}

type reportFields Report

// UnmarshalJSON reads the facts and keeps the whole report.
func (r *Report) UnmarshalJSON(b []byte) error {
	var f reportFields
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("reading the verification report: %w", err)
	}
	*r = Report(f)
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the whole report as verify wrote it.
func (r Report) MarshalJSON() ([]byte, error) {
	if r.raw != nil {
		return r.raw, nil
	}
	return json.Marshal(reportFields(r))
}
