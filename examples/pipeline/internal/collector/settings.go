package collector

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// Command is the name of the distribution's executable.
const Command = "otelcol-aionotel"

// Version is the Collector core release the distribution is built from.
const Version = "0.165.0"

// Settings returns the settings of the otelcol-aionotel command line: its
// build information, [Components] and the file and env configuration
// providers. Configuration locations come from the --config flags.
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
