"""Intake: a webhook delivery is checked for authenticity and committed to the queue in groups."""
