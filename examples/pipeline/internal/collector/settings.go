package collector

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// Command is the name of the distribution's executable (dist.name of
// builder-config.yaml).
const Command = "otelcol-aionotel"

// Version is the Collector core release the distribution is built from
// (dist.version of builder-config.yaml).
const Version = "0.165.0"

// Components returns the factories of every component of the distribution:
// those of builder-config.yaml, through the components.go ocb generates
// from it.
func Components() (otelcol.Factories, error) { return components() }

// Settings returns the settings the ocb-built otelcol-aionotel runs with:
// its build information, [Components] and the env and file configuration
// providers of builder-config.yaml, with env as the default scheme.
// Configuration locations come from the --config flags.
func Settings() otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     Command,
			Description: "OpenTelemetry Collector for the aionotel examples",
			Version:     Version,
		},
		Factories: Components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	}
}
