package slot

import (
	"context"
	"fmt"
	"strings"
)

// Provider builds and removes the cluster of one kind of slot, as kind's
// cluster.Provider does for its node providers. config.yaml's provider:
// names one; a slot's record keeps the name, so that destroy uses the
// provider that built the slot. Everything that differs between providers
// lives behind this interface, in the provider's own file.
type Provider interface {
	// Name is the provider's name in config.yaml and in slot records.
	Name() string
	// ValidateConfig checks the settings this provider reads.
	ValidateConfig(c *Config) error
	// Inputs lists what, besides the slot's names, makes two creates of
	// slot n the same.
	Inputs(m *Manager, n *Names) []string
	// Preflight adds the provider's findings about building slot n to rep.
	Preflight(ctx context.Context, m *Manager, rep *PreflightReport, n *Names, packageBytes int64)
	// NewRecord fills the provider's fields of slot n's record before
	// anything is built (and of the stand-in record destroy uses when
	// there is none).
	NewRecord(m *Manager, rec *Record, n *Names)
	// Create builds the slot, each step recorded through m.step.
	Create(ctx context.Context, m *Manager, rec *Record, n *Names) error
	// Destroy removes what Create built; what is already gone is skipped.
	Destroy(ctx context.Context, m *Manager, rec *Record, n *Names) error
	// Summary describes the slot's cluster in one line.
	Summary(rec *Record) string
	// Running lists what of slot n runs on the machine (clusters,
	// containers, contexts), asked of the machine, not of the records.
	Running(ctx context.Context, m *Manager, n *Names) ([]string, error)
}

// providers is the registry of providers by name: a new provider is one
// more entry here and a file of its own.
var providers = []Provider{kindProvider{}, existingProvider{}}

// ProviderNamed returns the provider registered as name.
func ProviderNamed(name string) (Provider, error) {
	for _, p := range providers {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("provider %q: use %s", name, strings.Join(ProviderNames(), " or "))
}

// ProviderNames lists the registered providers, the default first.
func ProviderNames() []string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name()
	}
	return names
}

// provider is the configured provider (resolved once by LoadConfig).
func (m *Manager) provider() (Provider, error) {
	if m.Config.provider != nil {
		return m.Config.provider, nil
	}
	p, err := ProviderNamed(m.Config.Provider)
	if err != nil {
		return nil, &ConfigError{err}
	}
	return p, nil
}

// recordProvider is the provider that built rec.
func recordProvider(rec *Record) (Provider, error) {
	p, err := ProviderNamed(rec.Provider)
	if err != nil {
		return nil, fmt.Errorf("the record of slot %s names an unknown provider: %w", rec.Name, err)
	}
	return p, nil
}

// Summary describes a slot's cluster in one line, as its provider does.
func Summary(rec *Record) string {
	p, err := recordProvider(rec)
	if err != nil {
		return fmt.Sprintf("%s provider (unknown), context %s", rec.Provider, rec.Context)
	}
	return p.Summary(rec)
}
