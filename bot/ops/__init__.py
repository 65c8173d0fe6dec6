"""Operator surfaces: the CLI, the admin API, health and metrics routes."""
