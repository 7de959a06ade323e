"""Bulk inserts of new rows: PostgreSQL's COPY, Django's `bulk_create` elsewhere.

An import of 10,000 tasks writes ~50,000 rows. Through `bulk_create` most of that time was
Django and psycopg building one INSERT with ~13,000 parameters per batch in Python (preparing
every value, compiling the VALUES list, then psycopg splitting the query text to bind it). COPY
streams the rows instead: psycopg formats them in C and the server parses them in one pass
(`bench/bench_packs.py` has the figures side by side).

`bulk_insert` takes unsaved model instances and returns them saved, with their primary keys, as
`bulk_create` does; what it leaves out is what the importers never use: signals (the house style
has none), `ignore_conflicts` and field validation (the services validate before they write).
"""

from __future__ import annotations

import json
import time
from typing import Sequence, TypeVar

from django.db import connections, models, router
from django.utils import timezone

M = TypeVar("M", bound=models.Model)


def bulk_insert(objs: Sequence[M], *, pks: bool = True) -> list[M]:
    """Insert `objs` (unsaved instances of one model) and return them with their primary keys set.

    `pks=False` is for rows nobody reads back in the same breath (audit events, link rows): the
    database numbers them as it writes them, which saves allocating the keys first (one query),
    and the instances are left without their keys."""
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    missing = [obj for obj in objs if getattr(obj, pk.attname) is None]
    if not pks and missing and len(missing) != len(objs):
        raise ValueError("bulk_insert(pks=False): either every instance has its key or none has")
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
    if missing and pks:
        for obj, value in zip(missing, ids_allocate(model, len(missing), using=using)):
            setattr(obj, pk.attname, value)
    elif missing:
        fields.remove(pk)
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    json_fields = [(index, field.encoder) for index, field in enumerate(fields) if isinstance(field, models.JSONField)]
    attnames = [field.attname for field in fields]
    sql = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    started = time.monotonic()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(sql) as copy:
            for obj in objs:
                row = [getattr(obj, attname) for attname in attnames]
                for index, encoder in json_fields:
                    if row[index] is not None:
                        row[index] = json.dumps(row[index], cls=encoder, ensure_ascii=False)
                copy.write_row(row)
    if connection.queries_logged:  # counted like any other statement (tests pin queries per batch)
        connection.queries_log.append({"sql": f"{sql} -- {len(objs)} rows",
                                       "time": f"{time.monotonic() - started:.3f}"})
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
    return objs


def ids_allocate(model: type[models.Model], count: int, *, using: str = "default") -> list[int]:
    """`count` new primary keys from the table's own sequence (PostgreSQL), in increasing order."""
    connection = connections[using]
    meta = model._meta
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [connection.ops.quote_name(meta.db_table), meta.pk.column, count])
        return sorted(row[0] for row in cursor.fetchall())
