"""Observing finished generations: the log writer, Prometheus metrics, reports and the dashboard."""
