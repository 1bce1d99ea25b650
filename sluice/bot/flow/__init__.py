"""The flow: what to do for each event (PR build, approval gate, commands, promotion), with the
settings it trusts and what it remembers between events."""
