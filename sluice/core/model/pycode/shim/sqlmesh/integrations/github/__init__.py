"""``sqlmesh.integrations.github``."""
