// Package errkind names what kind of failure an error is, so that one table
// (internal/cli) turns every kind into the suite's documented exit code.
// Libraries return kinds, never numbers.
package errkind

import (
	"errors"
	"fmt"
)

// Kind is the class of a failure, independent of which binary reports it.
type Kind int

const (
	// Unknown is an error that says nothing of itself; the CLI treats it as Environment.
	Unknown Kind = iota
	// Negative: the thing checked is bad or not ready (verification failed,
	// gate failed, still soaking).
	Negative
	// Usage: what the operator typed is wrong (unknown flag, missing argument,
	// a named file that does not exist or is not what the flag wants).
	Usage
	// Environment: the machine or the state does not allow the step (state dir
	// unreadable or damaged, Docker or a cluster unreachable, disk full, a
	// precondition of the strategy missing).
	Environment
	// Conflict: another process holds the lock or the running step, the
	// transition is illegal, or the slot is protected.
	Conflict
)

// String names the kind as the JSON reports and docs do.
func (k Kind) String() string {
	switch k {
	case Negative:
		return "negative"
	case Usage:
		return "usage"
	case Environment:
		return "environment"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// Kinded is implemented by typed library errors that know their kind.
type Kinded interface {
	ErrorKind() Kind
}

// Error attaches a Kind to an error.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrorKind reports the attached kind.
func (e *Error) ErrorKind() Kind { return e.Kind }

// New returns an error of kind k with a formatted message (%w wraps as in fmt.Errorf).
func New(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// Wrap attaches kind k to err; nil stays nil.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// Of returns the kind of the outermost classified error in err's chain, or
// Unknown when nothing in the chain says.
func Of(err error) Kind {
	var k Kinded
	if errors.As(err, &k) {
		return k.ErrorKind()
	}
	return Unknown
}
