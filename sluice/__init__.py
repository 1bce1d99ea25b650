"""Sluice: GitOps deployment for SQL data pipelines on Apache Spark."""

__version__ = "0.1.0"
