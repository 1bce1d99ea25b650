"""The plan-review UI and its read-only HTTP API (issue 44): pages under ``/ui`` and JSON
under ``/api/v1``, served by the service (:mod:`sluice.bot.entry.app`) and by ``sluice
ui`` (:mod:`sluice.bot.entry.ui`). Imported only by ``entry``; it reads the state, the
ledger and the queue through their own modules and never writes.
"""
