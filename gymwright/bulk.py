"""Bulk inserts of new rows: PostgreSQL's COPY, Django's `bulk_create` elsewhere.

An import of 10,000 tasks writes ~50,000 rows. Through `bulk_create` most of that time was
Django and psycopg building one INSERT with ~13,000 parameters per batch in Python (preparing
every value, compiling the VALUES list, then psycopg splitting the query text to bind it). COPY
streams the rows instead: psycopg formats them in C and the server parses them in one pass
(`bench/bench_packs.py` has the figures side by side).

- `bulk_insert_rows` inserts rows given as tuples of columns (what the importers never use is left
  out: signals, which the house style has none of, `ignore_conflicts` and field validation, which
  the services do before they write), and `saved_instances` makes the model instances of such rows
  for a caller that hands them on;
- `ids_reserve` hands out primary keys before the rows exist, so that rows can point at each other
  from the start (a task at its version, the version at its task);
- `Pipeline` runs those inserts, and the checks of the foreign keys they make, on a second thread
  while the caller makes the next rows;
- `keys_of` finds which of a batch's unique keys exist already.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from django.db import connections, models, router
from django.db.models.base import ModelState
from django.utils import timezone

M = TypeVar("M", bound=models.Model)


def bulk_insert_rows(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    json_text: dict[str, Sequence[str | None]] | None = None,
) -> None:
    """Insert new rows given as tuples of `columns` (attribute names), without a model instance for
    each (a third of such a batch's time). Give the primary key as a column (from `ids_reserve`)
    where other rows point at these; left out, the database numbers them. A field left out takes
    its default, computed once for the batch (so give any column whose default differs per row),
    and auto_now fields the batch's time. `json_text` gives, for a JSON column, each row's value
    already serialised (None: serialise it here), as an import has it from hashing the document."""
    if rows:
        _insert_rows(connections[router.db_for_write(model)], model, columns, rows, json_text or {})


def _insert_rows(connection, model, columns, rows, json_text) -> None:
    """`bulk_insert_rows` on `connection` (a Pipeline's thread is handed the caller's: Django's
    `connections` gives each thread a connection of its own, outside the caller's transaction)."""
    meta = model._meta
    if connection.vendor != "postgresql":
        model._default_manager.using(connection.alias).bulk_create([model(**dict(zip(columns, row))) for row in rows])
        return
    given = [meta.get_field(name) for name in columns]
    now = timezone.now()
    rest, filled = [], []
    for field in meta.concrete_fields:
        if field in given or field is meta.pk:
            continue
        rest.append(field)
        auto = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        filled.append(now if auto else field.get_default())
    _copy(connection, meta, given + rest, ([*row, *filled] for row in rows), len(rows), json_text)


def saved_instances(
    model: type[M], columns: Sequence[str], rows: Iterable[Sequence], *, using: str = "default"
) -> list[M]:
    """Instances of `model` for rows written by `bulk_insert_rows` (or a Pipeline) from the same tuples of
    `columns`, as the caller hands them on; fields left out take their defaults. Made as Django makes
    an instance it unpickles (`Model.__reduce__`: the class's `__new__`, then its attribute dict), not
    through `__init__` and a descriptor per field: ~1 µs an instance against ~4, and an import makes
    two per task."""
    fields = model._meta.concrete_fields
    template = {field.attname: field.get_default() for field in fields}
    made = []
    for row in rows:
        values = template.copy()
        values.update(zip(columns, row))
        state = values["_state"] = ModelState()
        state.adding, state.db = False, using
        instance = model.__new__(model)
        instance.__dict__.update(values)
        made.append(instance)
    return made


def _copy(
    connection, meta, fields: list, rows: Iterable[list], count: int, json_text: dict[str, Sequence[str | None]]
) -> None:
    """One COPY of `rows` (lists of `fields`' values) into the model's table; JSON fields serialised
    unless `json_text` has them already. Through the driver's own cursor (Django's is bound to the
    thread that opened the connection, and a `Pipeline` copies from another), with Django's error
    classes and query log."""
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    json_fields = [
        (index, field.encoder, json_text.get(field.attname))
        for index, field in enumerate(fields)
        if isinstance(field, models.JSONField)
    ]
    sql = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    started = time.monotonic()
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.cursor() as cursor:
        with cursor.copy(sql) as copy:
            for number, row in enumerate(rows):
                for index, encoder, texts in json_fields:
                    if row[index] is not None:
                        text = texts[number] if texts is not None else None
                        row[index] = (
                            text if text is not None else json.dumps(row[index], cls=encoder, ensure_ascii=False)
                        )
                copy.write_row(row)
    _logged(connection, f"{sql} -- {count} rows", started)


def _logged(connection, sql: str, started: float) -> None:
    if connection.queries_logged:  # counted like any other statement (tests pin queries per batch)
        connection.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})


def ids_reserve(model: type[models.Model], count: int) -> list[int]:
    """`count` new primary keys of `model`, in increasing order, handed out before the rows exist so
    that other new rows can point at them first. PostgreSQL: from the table's own sequence; SQLite:
    by moving the table's AUTOINCREMENT counter on (inside the write transaction, so no other
    writer can take the same keys; the next row saved the ordinary way numbers after them)."""
    using = router.db_for_write(model)
    connection = connections[using]
    meta = model._meta
    if count <= 0:
        return []
    table, key = connection.ops.quote_name(meta.db_table), connection.ops.quote_name(meta.pk.column)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [table, meta.pk.column, count],
            )
            return sorted(row[0] for row in cursor.fetchall())
        if connection.vendor != "sqlite":
            raise NotImplementedError(f"ids_reserve: no way to reserve keys on {connection.vendor}")
        # the counter moves on from the largest key in use, as SQLite's own next key would
        bump = (
            f"UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max({key}) FROM {table}), 0)) + %s "
            "WHERE name = %s RETURNING seq"
        )
        cursor.execute(bump, [count, meta.db_table])
        found = cursor.fetchone()
        if found is None:  # a table no row was ever inserted into has no counter yet
            cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, 0)", [meta.db_table])
            cursor.execute(bump, [count, meta.db_table])
            found = cursor.fetchone()
    return list(range(found[0] - count + 1, found[0] + 1))


class Pipeline:
    """Bulk inserts, and the checks of the foreign keys they make, run in order on a second thread
    while the caller makes the next rows (PostgreSQL; elsewhere each runs at once, in the caller).

    A 1,000-task import spends about as long waiting on PostgreSQL (parsing and indexing the COPY
    rows, checking ~10,000 foreign keys at COMMIT) as it spends in Python validating and hashing
    the documents; one after the other, each waits for the other. Handed to a Pipeline chunk by
    chunk, a chunk's rows are written, and their foreign keys checked (`check_constraints`: what
    would otherwise wait for COMMIT), while the next chunk is validated: the thread mostly waits
    on the socket, which releases the GIL. The thread uses the transaction's own connection (the
    driver serialises its use; the caller should leave the database alone until `wait`), so it must
    run inside `transaction.atomic`. The first error the thread meets is raised in the caller at its
    next call or at the end of the block, and the rest of the queue is dropped; an error in the
    caller's block drops the queue too. Either way the transaction then rolls back."""

    def __init__(self, using: str = "default"):
        self.connection = connections[using]
        self.threaded = self.connection.vendor == "postgresql"
        self._jobs: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._abandoned = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Pipeline:
        if self.threaded:
            if not self.connection.in_atomic_block:
                raise RuntimeError("a Pipeline writes inside a transaction: use it within transaction.atomic()")
            self.connection.ensure_connection()
            _fine_switching(True)
            self._thread = threading.Thread(target=self._work, name="gymwright-bulk-pipeline", daemon=True)
            self._thread.start()
        return self

    def insert(
        self,
        model: type[models.Model],
        columns: Sequence[str],
        rows: Sequence[Sequence],
        *,
        json_text: dict[str, Sequence[str | None]] | None = None,
    ) -> None:
        """`bulk_insert_rows(model, columns, rows, json_text=...)`, in turn."""
        if rows:
            self._submit(lambda: _insert_rows(self.connection, model, columns, rows, json_text or {}))

    def check_constraints(self) -> None:
        """Check the deferred foreign keys of every row written so far, now instead of at COMMIT (the
        rows written so far must point only at rows that exist); then defer them again, as Django
        declares them (DEFERRABLE INITIALLY DEFERRED)."""
        if self.threaded:
            self._submit(self._constraints_checked)

    def wait(self) -> None:
        """Until everything handed over is written; raises the thread's error, if any."""
        if self.threaded:
            self._jobs.join()
            self._raise()

    def __exit__(self, exc_type, exc, traceback) -> None:
        if not self.threaded or self._thread is None:
            return
        if exc_type is not None:
            self._abandoned = True  # the transaction rolls back: what is queued need not be written
        self._jobs.put(None)
        self._thread.join()
        _fine_switching(False)
        if exc_type is None:
            self._raise()

    def _submit(self, job: Callable[[], None]) -> None:
        if not self.threaded:
            job()
            return
        self._raise()
        self._jobs.put(job)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._abandoned = True
            raise error

    def _constraints_checked(self) -> None:
        started = time.monotonic()
        with self.connection.wrap_database_errors, self.connection.connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        _logged(self.connection, "SET CONSTRAINTS ALL IMMEDIATE; SET CONSTRAINTS ALL DEFERRED", started)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._error is None and not self._abandoned:
                    try:
                        job()
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                        self._error = exc
            finally:
                self._jobs.task_done()


# While a Pipeline runs, the interpreter offers the GIL to the other thread every 0.5 ms instead of
# every 5 ms (Python's default): the writer thread wakes on its socket many times per chunk (the COPY
# starts, its data goes out, the server answers) and each time waited for the validating thread's
# slice to run out. Measured side by side on a 1,000-task import: the caller waited 60-90 ms for the
# writer at the end with the default, ~20 ms at 0.5 ms (170-190 ms in all against 220-270 ms).
_SWITCH_INTERVAL_S = 0.0005
_switching_lock = threading.Lock()
_switching = {"pipelines": 0, "before": None}


def _fine_switching(start: bool) -> None:
    with _switching_lock:
        if start:
            if _switching["pipelines"] == 0:
                _switching["before"] = sys.getswitchinterval()
                sys.setswitchinterval(min(_SWITCH_INTERVAL_S, _switching["before"]))
            _switching["pipelines"] += 1
        else:
            _switching["pipelines"] -= 1
            if _switching["pipelines"] == 0:
                sys.setswitchinterval(_switching["before"])


def keys_of(model: type[models.Model], field_name: str, values: Sequence) -> dict:
    """{value: primary key} for each of `values` that a row of `model` has in its unique field
    `field_name` (the ones that exist).

    On PostgreSQL each value is one probe of the field's unique index, whatever the table's size or
    statistics: asked as `field IN (...)` of a 1,000-value batch, the planner scans the whole table
    whenever it expects that to be cheaper (a table never analysed, or one whose statistics lag
    behind a bulk load, as in every import into a new database): 17 ms at 94,000 tasks against 2 ms
    probed, growing with the table. Elsewhere the ORM's IN lookup."""
    field = model._meta.get_field(field_name)
    if not field.unique:
        raise ValueError(f"{model.__name__}.{field_name} is not unique")
    values = list(dict.fromkeys(values))
    if not values:
        return {}
    using = router.db_for_read(model)
    connection = connections[using]
    if connection.vendor != "postgresql":
        return dict(
            model._default_manager.using(using)
            .filter(**{f"{field_name}__in": values})
            .order_by()
            .values_list(field_name, "pk")
        )
    quote = connection.ops.quote_name
    # LIMIT 1 keeps the subquery a probe per value (the planner cannot turn it into a join).
    sql = (
        f"SELECT probe.value, found.{quote(model._meta.pk.column)} "
        f"FROM unnest(%s::{field.cast_db_type(connection)}[]) AS probe(value) "
        f"CROSS JOIN LATERAL (SELECT {quote(model._meta.pk.column)} FROM {quote(model._meta.db_table)} "
        f"WHERE {quote(field.column)} = probe.value LIMIT 1) AS found"
    )
    prepared = [field.get_db_prep_value(value, connection) for value in values]
    with connection.cursor() as cursor:
        cursor.execute(sql, [prepared])
        return dict(cursor.fetchall())
