"""A process that migrates a state database and stops inside a migration, to be killed there.

Run as ``python -m tests.helpers.migrate_child URL MARKER``: it opens the state the way the
service does (state, queue and ledger tracks, in one run of the migration runner), but the
state track's last migration, once its change is made and before it is recorded and the
transaction commits, touches MARKER and sleeps: the test kills it (SIGKILL) there.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from sqlalchemy import Connection

from sluice.bot.flow.ledger_schema import LEDGER
from sluice.bot.queue.schema import QUEUE
from sluice.core.db.engine import create_state_engine
from sluice.core.db.migrate import Migration, migrate
from sluice.core.state.migrations import STATE


def main(url: str, marker: Path) -> None:
    last = STATE.migrations[-1]

    def up_then_wait(conn: Connection) -> None:
        last.up(conn)
        # Written whole, then renamed: the test never reads a marker that is still empty.
        partial = marker.with_suffix(".partial")
        partial.write_text(str(last.number))
        partial.replace(marker)
        time.sleep(120)  # killed here, mid-transaction

    paused = dataclasses.replace(
        STATE, migrations=(*STATE.migrations[:-1], Migration(last.number, last.name, up_then_wait))
    )
    migrate(create_state_engine(url), [paused, QUEUE, LEDGER])


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
