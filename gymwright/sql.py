"""Read queries the ORM compiles once per process and then runs with new parameters.

Compiling a queryset to SQL costs more CPU than running it: measured on the task page (10,000
tasks), a count of unread inbox items took 0.61 ms of the web process's CPU through the ORM and
0.12 ms as the same SQL through a cursor, and the task with its six joined rows 1.8 ms. A hot read
that runs on every page is written once as a queryset (its rules stay in the ORM, in one place)
and wrapped here:

    _unread = Prepared(lambda user_id: InboxItem.objects.filter(recipient_id=user_id, read_at__isnull=True),
                       count=True, user_id=int)
    _unread(user_id=user.pk) -> 3                  # as .count()

`build` may return a queryset of model instances (with `select_related`, `only`/`defer`), a
`values_list()` one, or, with count=True, any filtered queryset; a call returns what iterating
it would (a list), or the count. `build` is called once per database (and vendor) with a marker
for each parameter, a value no real row holds; the compiled SQL's parameters are searched for
the markers, and each later call puts its values in their places. What the query returns goes
through the ORM's own converters and row populators, so the objects are the ones the queryset
would give.

A page of a list takes its bounds at each call with `sliced=True` (`offset` and `limit` become
parameters), and a filter that a call may leave out is named in `optional`: `build` then receives
only the parameters given (a call with "" or None omits one), and each combination compiles once:

    _keys = Prepared(lambda environment=None: tasks(environment), sliced=True, optional=["environment"],
                     environment=str)
    _keys(offset=50, limit=50) ; _keys(offset=0, limit=50, environment="shell")

Limits, on purpose: parameters are ints or strings that the ORM passes through unchanged (ids and
exact matches: not `icontains`, not datetimes, which a backend may adapt); no `prefetch_related`
and no related managers (their known objects); a slice's bounds are fixed when `build` runs unless
`sliced`. A query that breaks one raises at its first call, so it fails loudly in every test that
reaches it. Each run is logged like any other query (query-count tests see it).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from django.db import connections
from django.db.models import Count, QuerySet
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesListIterable, get_related_populators


# Markers stand for the parameters while the query compiles (they are never sent): values no query
# writes as a constant, and inside every integer field's range (the ORM drops a lookup out of range).
class SmallInt(int):
    """A parameter's type for a small integer column (a SmallIntegerField, whose range the ORM checks a value
    against, dropping the lookup of one outside it): its marker fits that range."""


_MARKERS = {
    int: lambda i: 2_147_480_011 + 7 * i,
    str: lambda i: f"\ue000gymwright-marker-{i}\ue000",
    SmallInt: lambda i: 32_611 + 7 * i,
}
# The values each integer kind is prepared for (its markers lie inside): the ORM checks a value against its column's
# range (one outside matches nothing), a prepared statement would send it as it is (SQLite cannot take one past 64
# bits, PostgreSQL refuses one past its parameter's type), so a call with a value outside goes through the ORM.
_PREPARED_RANGE = {int: (-(2**31), 2**31 - 1), SmallInt: (-(2**15), 2**15 - 1)}
# A slice's bounds are written into the SQL as numbers (LIMIT n OFFSET m), not as parameters: a `sliced` query
# compiles with these, whose text is then made two parameters.
_OFFSET, _LIMIT = 1_070_000_003, 1_070_000_011


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: list
    places: dict[str, list[int]]  # parameter -> its positions in params
    compiler: Any
    converters: dict
    shape: str  # "model", "tuples", "flat" or "count"
    model: Any = None
    init_list: tuple = ()
    model_slice: slice | None = None
    related_populators: tuple = ()
    annotation_col_map: dict | None = None


class Prepared:
    def __init__(
        self,
        build: Callable[..., QuerySet],
        *,
        count: bool = False,
        sliced: bool = False,
        optional: tuple | list = (),
        **types: type,
    ):
        unknown = {name: kind for name, kind in types.items() if kind not in _MARKERS}
        if unknown:
            raise TypeError(f"Prepared: parameters must be int, SmallInt or str, not {unknown}")
        if set(optional) - set(types) or (count and sliced) or {"offset", "limit"} & set(types):
            raise TypeError(
                "Prepared: optional names parameters; a count is not sliced; offset and limit are the slice's"
            )
        self._build = build
        self._count = count
        self._sliced = sliced
        self._optional = frozenset(optional)
        self._types = types
        self._compiled: dict[tuple, _Compiled] = {}
        self._lock = threading.Lock()

    def _compile(self, using: str, given: frozenset) -> _Compiled:
        markers = {name: _MARKERS[kind](i) for i, (name, kind) in enumerate(self._types.items()) if name in given}
        queryset = self._build(**markers)
        if queryset._prefetch_related_lookups or queryset._known_related_objects:
            raise TypeError("Prepared: no prefetch_related and no related managers")
        if self._count:  # COUNT of the rows as QuerySet.count() (an aggregate in values_list groups by row)
            queryset = queryset.order_by().values_list(Count("pk"), flat=True)
            queryset.query.group_by = None
        if self._sliced:
            queryset = queryset[_OFFSET : _OFFSET + _LIMIT]
        shape = {
            ModelIterable: "model",
            ValuesListIterable: "tuples",
            FlatValuesListIterable: "count" if self._count else "flat",
        }.get(queryset._iterable_class)
        if shape is None:
            raise TypeError("Prepared: build must return a queryset of model instances or a values_list()")
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        params = list(params)
        places: dict[str, list[int]] = {}
        for name, marker in markers.items():
            # (a backend may wrap a value, as psycopg's Int8 for a bigint column: the wrapper is kept)
            places[name] = [i for i, value in enumerate(params) if isinstance(value, type(marker)) and value == marker]
            if not places[name]:
                raise ValueError(
                    f"Prepared: parameter {name!r} is not among the compiled query's parameters "
                    f"(it must pass through the ORM unchanged)"
                )
        if self._sliced:  # the outermost LIMIT ... OFFSET ..., which ends the query, takes two parameters
            bounds = f"LIMIT {_LIMIT} OFFSET {_OFFSET}"
            if not sql.endswith(bounds) or sql.count(str(_OFFSET)) != 1:
                raise TypeError(f"Prepared: a sliced query must end with its bounds, not {sql[-60:]!r}")
            sql = sql[: -len(bounds)] + "LIMIT %s OFFSET %s"
            places.update(limit=[len(params)], offset=[len(params) + 1])
            params += [_LIMIT, _OFFSET]
        select = compiler.select
        converters = compiler.get_converters([column[0] for column in select[0 : compiler.col_count]])
        compiled = _Compiled(
            sql=sql, params=params, places=places, compiler=compiler, converters=converters, shape=shape
        )
        if shape != "model":
            return compiled
        klass_info = compiler.klass_info  # as ModelIterable reads it
        fields = klass_info["select_fields"]
        start, end = fields[0], fields[-1] + 1
        return replace(
            compiled,
            model=klass_info["model"],
            init_list=tuple(column[0].target.attname for column in select[start:end]),
            model_slice=slice(start, end),
            related_populators=tuple(get_related_populators(klass_info, select, using)),
            annotation_col_map=compiler.annotation_col_map,
        )

    def __call__(self, *, using: str = "default", **values) -> list | int:
        connection = connections[using]
        given = frozenset(
            name for name in self._types if name not in self._optional or values.get(name) not in (None, "")
        )
        for name in self._optional - given:
            values.pop(name, None)
        for name, kind in self._types.items():
            low, high = _PREPARED_RANGE.get(kind, (None, None))
            if low is not None and name in values and not low <= values[name] <= high:
                return self._through_the_orm(
                    using,
                    {name: values[name] for name in given if name in values},
                    values.get("offset"),
                    values.get("limit"),
                )
        key = (using, connection.vendor, given)
        compiled = self._compiled.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(key) or self._compile(using, given)
                self._compiled[key] = compiled
        if values.keys() != compiled.places.keys():
            raise TypeError(f"Prepared: expected {sorted(compiled.places)}, got {sorted(values)}")
        params = list(compiled.params)
        for name, indexes in compiled.places.items():
            for index in indexes:
                wrap = type(params[index])
                params[index] = values[name] if wrap is int or wrap is str else wrap(values[name])
        with connection.cursor() as cursor:  # Django's: it connects, checks health and refuses a broken transaction
            if connection.vendor == "postgresql":
                rows = _execute_prepared(connection, cursor, compiled.sql, params)
            else:
                cursor.execute(compiled.sql, params)
                rows = cursor.fetchall()
        if compiled.converters:
            rows = [tuple(row) for row in compiled.compiler.apply_converters(rows, compiled.converters)]
        if compiled.shape == "count":
            return rows[0][0]
        if compiled.shape == "flat":
            return [row[0] for row in rows]
        if compiled.shape == "tuples":
            return rows
        objects = []
        model, init_list, model_slice = compiled.model, compiled.init_list, compiled.model_slice
        for row in rows:
            obj = model.from_db(using, init_list, row[model_slice])
            for populator in compiled.related_populators:
                populator.populate(row, obj)
            for name, position in (compiled.annotation_col_map or {}).items():
                setattr(obj, name, row[position])
            objects.append(obj)
        return objects

    def _through_the_orm(self, using: str, values: dict, offset, limit) -> list | int:
        """What a call answers, from the queryset itself (for a value the prepared statement cannot take)."""
        queryset = self._build(**values).using(using)
        if self._count:
            return queryset.count()
        if self._sliced:
            queryset = queryset[offset : offset + limit]
        return list(queryset)


class PreparedIn:
    """A Prepared query with one list parameter (`pk__in=...`): the ORM writes a list as one
    placeholder per item, so one query is compiled per list length (a page of 50 keys is one),
    each on its first call. An empty list gives no rows (as the ORM's empty `__in`), without a query.

        _rows = PreparedIn(lambda keys: Task.objects.filter(pk__in=keys).values_list("slug"), "keys", item=int)
        _rows(keys=[3, 5]) -> [("a",), ("b",)]
    """

    def __init__(self, build: Callable[..., QuerySet], name: str, *, item: type, count: bool = False, **types: type):
        self._build, self._name, self._item, self._count, self._types = build, name, item, count, types
        self._by_length: dict[int, Prepared] = {}

    def __call__(self, **values) -> list | int:
        items = list(values.pop(self._name))
        if not items:
            return 0 if self._count else []
        prepared = self._by_length.get(len(items))
        if prepared is None:
            names = [f"{self._name}{i}" for i in range(len(items))]
            prepared = self._by_length.setdefault(
                len(items),
                Prepared(
                    lambda **markers: self._build(**{self._name: [markers.pop(n) for n in names]}, **markers),
                    count=self._count,
                    **{n: self._item for n in names},
                    **self._types,
                ),
            )
        return prepared(**values, **{f"{self._name}{i}": value for i, value in enumerate(items)})


def _execute_prepared(connection, cursor, sql: str, params: list) -> list:
    """Run `sql` as a server-side prepared statement on Django's own connection: PostgreSQL parses and
    plans it once per connection (and psycopg sends only the parameters), where Django's client-side
    cursor sends the whole text each time. Errors are Django's (wrap_database_errors) and the query
    is logged as Django logs one. A connection opened with prepare_threshold=None (a pooler that
    cannot keep prepared statements, as PgBouncer in transaction mode) is not prepared on."""
    raw = cursor.cursor.connection
    started = time.monotonic()
    rows: list = []

    def execute(sql, params, many, context):
        with psycopg.Cursor(raw) as server_cursor:
            server_cursor.execute(sql, params, prepare=raw.prepare_threshold is not None)
            rows.extend(server_cursor.fetchall())

    for wrapper in reversed(connection.execute_wrappers):  # connection.execute_wrapper() sees it, as any query
        execute = functools.partial(wrapper, execute)
    with connection.wrap_database_errors:
        execute(sql, params, False, {"connection": connection, "cursor": cursor})
    if connection.queries_logged:
        connection.queries_log.append(
            {
                "sql": connection.ops.compose_sql(sql, params),  # runnable as logged
                "time": f"{time.monotonic() - started:.3f}",
            }
        )
    return rows
