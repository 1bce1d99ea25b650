"""Forges: where pull requests live (GitHub, GitLab, a local git repository)."""
