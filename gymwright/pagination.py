"""Pagination that costs the same on page 100 as on page 1.

A page of a list that joins its related rows (`select_related`) makes the database join and
sort every row before the offset. `KeysFirstPaginator` selects the page's primary keys first
(the filters and the ordering only, which an index on the ordering answers), then loads the
full rows for just those keys, in the same order: two cheap queries instead of one that grows
with the page number.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.db.models.query import ModelIterable

from gymwright.sql import Prepared


class PreparedList:
    """A list for KeysFirstPaginator whose count and page of keys come from queries compiled once per process
    (gymwright.sql): `count` a `Prepared(count=True)`, `keys` a `Prepared(sliced=True)` of the list's keys in its
    order, both taking `values`. Paging a queryset compiles both queries on every request, which on a list page
    costs more CPU than running them."""

    def __init__(self, count: Prepared, keys: Prepared, **values):
        self._count, self._keys, self._values = count, keys, values

    def count(self) -> int:
        return self._count(**self._values)

    def page_keys(self, bottom: int, top: int) -> list:
        return self._keys(offset=bottom, limit=top - bottom, **self._values) if top > bottom else []


class KeysFirstPaginator(Paginator):
    """`rows`, when given, loads the page's rows from their keys (e.g. as `.values()` dicts with a "pk")."""

    def __init__(self, object_list, per_page, *args, rows=None, **kwargs):
        super().__init__(object_list, per_page, *args, **kwargs)
        self.rows = rows

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = min(bottom + self.per_page, self.count)
        if top + self.orphans >= self.count:
            top = self.count
        return self._get_page(keys_first(self.object_list, bottom, top, rows=self.rows), number, self)


def keys_first(queryset, bottom: int, top: int, rows=None) -> list:
    """`list(queryset[bottom:top])`, loading related rows only for that slice (with `rows(keys)` if given, which a
    PreparedList needs)."""
    if isinstance(queryset, PreparedList):
        keys = queryset.page_keys(bottom, top)
        by_key = {row["pk"]: row for row in rows(keys)} if keys else {}
        return [by_key[key] for key in keys if key in by_key]
    if rows is not None:
        keys = list(queryset.values_list("pk", flat=True)[bottom:top])
        by_key = {row["pk"]: row for row in rows(keys)} if keys else {}
        return [by_key[key] for key in keys if key in by_key]
    if (
        not isinstance(queryset, QuerySet)
        or queryset.query.annotations
        or queryset.query.distinct
        or queryset._iterable_class is not ModelIterable
    ):
        return list(queryset[bottom:top])  # rows that carry computed values: slice them as they are
    keys = list(queryset.values_list("pk", flat=True)[bottom:top])
    if not keys:
        return []
    by_key = {row.pk: row for row in _refetch(queryset, keys)}
    return [by_key[key] for key in keys if key in by_key]


def _refetch(queryset: QuerySet, keys: list) -> QuerySet:
    # Keep select_related / prefetch_related / defer from the original, drop its filters and slicing
    # (the keys already went through them; a multi-valued filter such as tags__name could repeat rows).
    fresh = queryset.model._default_manager.filter(pk__in=keys)
    fresh.query.select_related = queryset.query.select_related
    fresh.query.deferred_loading = queryset.query.deferred_loading
    fresh._prefetch_related_lookups = queryset._prefetch_related_lookups
    return fresh.order_by()
