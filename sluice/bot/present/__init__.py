"""Presentation: every word the bot writes (comment, checks, replies), redacted on the way out,
and the service's metrics."""
