"""Shared contract suites: each runs against the in-memory fake and against the real adapter."""
