// Package otelretry reports httpretry operations to OpenTelemetry.
package otelretry
