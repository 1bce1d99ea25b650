"""Events: forge payloads (GitHub, GitLab) and comment commands as neutral values (pure)."""
