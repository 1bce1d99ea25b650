"""``sqlmesh.integrations.github.cicd``."""
