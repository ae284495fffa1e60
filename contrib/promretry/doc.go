// Package promretry reports httpretry operations to Prometheus.
package promretry
