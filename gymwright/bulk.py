"""Bulk inserts of new rows: PostgreSQL's COPY, Django's `bulk_create` elsewhere.

An import of 10,000 tasks writes ~50,000 rows. Through `bulk_create` most of that time was
Django and psycopg building one INSERT with ~13,000 parameters per batch in Python (preparing
every value, compiling the VALUES list, then psycopg splitting the query text to bind it). COPY
streams the rows instead: psycopg formats them in C and the server parses them in one pass
(`bench/bench_packs.py` has the figures side by side).

`bulk_insert` takes unsaved model instances and returns them saved, with their primary keys, as
`bulk_create` does; what it leaves out is what the importers never use: signals (the house style
has none), `ignore_conflicts` and field validation (the services validate before they write).
`bulk_insert_rows` takes plain tuples for rows nobody reads back.
"""

from __future__ import annotations

import json
import time
from typing import Iterable, Sequence, TypeVar

from django.db import connections, models, router
from django.utils import timezone

M = TypeVar("M", bound=models.Model)


def bulk_insert(objs: Sequence[M], *, json_text: dict[str, Sequence[str | None]] | None = None) -> list[M]:
    """Insert `objs` (unsaved instances of one model) and return them with their primary keys set
    (allocated in one query unless they are set already). `json_text` gives, for a JSON field, each
    object's value already serialised (None: serialise it here), as an import has it from hashing
    the document. Rows nobody reads back go through `bulk_insert_rows`."""
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    missing = [obj for obj in objs if getattr(obj, pk.attname) is None]
    using = router.db_for_write(model)
    connection = connections[using]
    if connection.vendor != "postgresql":
        return model._default_manager.using(using).bulk_create(objs)
    now = timezone.now()
    for field in meta.concrete_fields:  # what DateTimeField.pre_save does, once for the batch
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            for obj in objs:
                setattr(obj, field.attname, now)
    fields = list(meta.concrete_fields)
    for obj, value in zip(missing, ids_allocate(model, len(missing), using=using) if missing else ()):
        setattr(obj, pk.attname, value)
    attnames = [field.attname for field in fields]
    _copy(connection, meta, fields, ([getattr(obj, attname) for attname in attnames] for obj in objs), len(objs),
          json_text or {})
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
    return objs


def instances(model: type[M], columns: Sequence[str], rows: Iterable[Sequence]) -> list[M]:
    """Unsaved instances of `model` from tuples of `columns` (attribute names), made as Django makes
    the rows it reads: from positional values in field order, half the time of keyword arguments
    (an import makes thousands). Fields left out take their defaults, computed once."""
    fields = model._meta.concrete_fields
    where = {field.attname: number for number, field in enumerate(fields)}
    template = [field.get_default() for field in fields]
    positions = [where[name] for name in columns]
    made = []
    for row in rows:
        values = template.copy()
        for position, value in zip(positions, row):
            values[position] = value
        made.append(model(*values))
    return made


def bulk_insert_rows(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Insert new rows that nobody reads back (audit events, link rows), given as tuples of
    `columns` (attribute names), without making a model instance for each (a third of such a
    batch's time). The database numbers them; a field left out takes its default, computed once
    for the batch (so give any column whose default differs per row), and auto_now fields the
    batch's time."""
    if not rows:
        return
    meta = model._meta
    using = router.db_for_write(model)
    connection = connections[using]
    if connection.vendor != "postgresql":
        model._default_manager.using(using).bulk_create([model(**dict(zip(columns, row))) for row in rows])
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
    _copy(connection, meta, given + rest, ([*row, *filled] for row in rows), len(rows), {})


def _copy(connection, meta, fields: list, rows: Iterable[list], count: int,
          json_text: dict[str, Sequence[str | None]]) -> None:
    """One COPY of `rows` (lists of `fields`' values) into the model's table; JSON fields serialised
    unless `json_text` has them already."""
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    json_fields = [(index, field.encoder, json_text.get(field.attname)) for index, field in enumerate(fields)
                   if isinstance(field, models.JSONField)]
    sql = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    started = time.monotonic()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(sql) as copy:
            for number, row in enumerate(rows):
                for index, encoder, texts in json_fields:
                    if row[index] is not None:
                        text = texts[number] if texts is not None else None
                        row[index] = text if text is not None else json.dumps(row[index], cls=encoder,
                                                                              ensure_ascii=False)
                copy.write_row(row)
    if connection.queries_logged:  # counted like any other statement (tests pin queries per batch)
        connection.queries_log.append({"sql": f"{sql} -- {count} rows", "time": f"{time.monotonic() - started:.3f}"})


def ids_allocate(model: type[models.Model], count: int, *, using: str = "default") -> list[int]:
    """`count` new primary keys from the table's own sequence (PostgreSQL), in increasing order."""
    connection = connections[using]
    meta = model._meta
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [connection.ops.quote_name(meta.db_table), meta.pk.column, count])
        return sorted(row[0] for row in cursor.fetchall())


def ids_reserve(model: type[models.Model], count: int) -> list[int] | None:
    """`count` primary keys for rows about to be inserted, where the database hands them out before
    the rows exist (PostgreSQL's sequences), so that other new rows can point at them first; None
    elsewhere (SQLite numbers rows as it inserts them)."""
    using = router.db_for_write(model)
    if connections[using].vendor != "postgresql":
        return None
    return ids_allocate(model, count, using=using)
