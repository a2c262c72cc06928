"""The run store: SQLite, one row per agent call, written the moment the call completes.

Durability: WAL journal with ``synchronous=FULL`` and one transaction per record, so a process killed at
any moment leaves every finished record and no partial one. The primary key is the call key, so resuming a
run never duplicates a record.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.records import AgentRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    protocol TEXT NOT NULL,
    role TEXT NOT NULL,
    round INTEGER NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_essay ON records (protocol, essay_id, trait);
CREATE TABLE IF NOT EXISTS essays (id TEXT PRIMARY KEY, position INTEGER NOT NULL, essay TEXT NOT NULL);
"""


class RunStore:
    """Records of one run directory (``<run dir>/store.sqlite``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(SCHEMA)

    # -- run configuration -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        blob = json.dumps(value, sort_keys=True, default=str)
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, blob))

    def bind_config(self, config: dict[str, Any]) -> bool:
        """Store the run's configuration, or check it matches the stored one. True when resuming."""
        stored = self.get_meta("config")
        if stored is None:
            self.set_meta("config", config)
            return False
        current = json.loads(json.dumps(config, sort_keys=True, default=str))
        if stored != current:
            diff = sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))
            raise ConfigError(
                f"run at {self.path.parent} was made with different settings ({', '.join(diff)}); "
                "use another --run-dir to start a new run"
            )
        return True

    # -- the essays a run scores ----------------------------------------------------------------------
    def add_essays(self, essays: list[Essay]) -> None:
        """Remember the essays being scored (with their human scores) for evaluation and reports."""
        start = int(self._conn.execute("SELECT COUNT(*) FROM essays").fetchone()[0])
        with self._conn:
            self._conn.execute("BEGIN")
            for i, essay in enumerate(essays):
                self._conn.execute(
                    "INSERT OR IGNORE INTO essays (id, position, essay) VALUES (?, ?, ?)",
                    (essay.id, start + i, essay.model_dump_json()),
                )

    def essays(self) -> list[Essay]:
        rows = self._conn.execute("SELECT essay FROM essays ORDER BY position")
        return [Essay.model_validate_json(blob) for (blob,) in rows]

    # -- records -----------------------------------------------------------------------------------
    def get(self, key: str) -> AgentRecord | None:
        row = self._conn.execute("SELECT record FROM records WHERE key = ?", (key,)).fetchone()
        return None if row is None else AgentRecord.model_validate_json(row[0])

    def put(self, record: AgentRecord) -> bool:
        """Write a finished record; False (and nothing written) if its key is already stored."""
        cur = self._conn.execute(
            "INSERT OR IGNORE INTO records (key, essay_id, trait, protocol, role, round, error, created_at, record)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.key,
                record.essay_id,
                record.trait,
                record.protocol,
                record.role,
                record.round,
                record.error,
                record.created_at,
                record.model_dump_json(),
            ),
        )
        return cur.rowcount == 1

    def keys(self) -> set[str]:
        return {row[0] for row in self._conn.execute("SELECT key FROM records")}

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def records(self, protocol: str | None = None, role: str | None = None) -> Iterator[AgentRecord]:
        sql, args = "SELECT record FROM records WHERE 1=1", []
        if protocol is not None:
            sql += " AND protocol = ?"
            args.append(protocol)
        if role is not None:
            sql += " AND role = ?"
            args.append(role)
        for (blob,) in self._conn.execute(sql + " ORDER BY created_at, key", args):
            yield AgentRecord.model_validate_json(blob)

    def close(self) -> None:
        self._conn.close()

    # -- export ------------------------------------------------------------------------------------
    def export_records_jsonl(self, path: str | Path) -> int:
        n = 0
        with Path(path).open("w", encoding="utf-8") as fh:
            for record in self.records():
                fh.write(record.model_dump_json() + "\n")
                n += 1
        return n


def write_scores_csv(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write per-essay trait score rows (one row per essay x trait x protocol)."""
    if not rows:
        Path(path).write_text("", encoding="utf-8")
        return
    fields = list(rows[0])
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
