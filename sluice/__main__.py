"""``python -m sluice``: the same command as ``sluice``."""

from sluice.cli import main

if __name__ == "__main__":
    main()
