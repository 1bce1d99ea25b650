"""Hostile cases, one file per row group of docs/security.md's threat table."""
