"""``sqlmesh.integrations``: only what config files import (the GitHub bot's config)."""
