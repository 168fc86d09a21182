// Package slot holds the record of each named environment ("slot": a
// management cluster and its registry) in the state dir.
package slot

import (
	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// The record types and their parser live in internal/record, below
// internal/site, which reads them; these names keep the slot package's
// callers as they were.
type (
	// Record is slots/<name>.json.
	Record = record.Slot
	// PackageRef is the package deployed into a slot.
	PackageRef = record.PackageRef
	// DeployAttempt is a deploy into a slot that started.
	DeployAttempt = record.DeployAttempt
	// GateResult is the last gate run recorded for a slot.
	GateResult = record.GateResult
	// StepRecord is one provider step of create.
	StepRecord = record.StepRecord
	// DamagedError is a slot record that cannot be read.
	DamagedError = record.DamagedError
	// NotFoundError is a slot with no record.
	NotFoundError = record.NotFoundError
	// ClusterID is the identity of a slot's cluster.
	ClusterID = record.ClusterID
)

// RecordAPIVersion and RecordKind identify a slot record file.
const (
	RecordAPIVersion = record.RecordAPIVersion
	RecordKind       = record.RecordKind
)

// DetailAlreadyCreated is create's proof event for a slot built already.
const DetailAlreadyCreated = record.DetailAlreadyCreated

// ValidName checks a slot name (record.ValidName).
func ValidName(name string) error { return record.ValidName(name) }

// RepairOf rebuilds the damaged record of slot name in the state dir d
// (record.RepairOf).
func RepairOf(d *state.Dir, name string) advice.Cmd { return record.RepairOf(d, name) }

// Load reads a slot's record (record.LoadSlot).
func Load(d *state.Dir, name string) (*Record, error) { return record.LoadSlot(d, name) }

// Save writes a slot's record atomically (record.SaveSlot).
func Save(d *state.Dir, r *Record) error { return record.SaveSlot(d, r) }

// List returns the names of all slots with a record (record.ListSlots).
func List(d *state.Dir) ([]string, error) { return record.ListSlots(d) }

func path(d *state.Dir, name string) string { return record.SlotPath(d, name) }
