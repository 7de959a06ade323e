"""Model fields and lookups shared by the apps."""

from __future__ import annotations

from django.core.exceptions import EmptyResultSet
from django.db import models


class BulkJSONField(models.JSONField):
    """A JSONField that `bulk_create` inserts as ordinary VALUES rows.

    On PostgreSQL, Django 5.2 inserts a batch through `UNNEST(%s::jsonb[])`: the whole column
    becomes one array literal, and psycopg escapes every quote of every document inside it in
    Python (one regex callback per `"`): ~110 ms per 1,000 task documents against ~40 ms for the
    same rows as VALUES (psycopg's mogrify, measured side by side). Having `get_placeholder` is
    what makes Django keep the VALUES form; the SQL and the stored value are the same. For small
    documents (audit data, reviews) UNNEST is the cheaper form: use this for large ones only.

    The column is a plain JSONField to migrations (`deconstruct`), so swapping one in needs none.
    """

    def get_placeholder(self, value, compiler, connection) -> str:
        return "%s"

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class AnyOf(models.Lookup):
    """`filter(slug__any=values)`: the same rows as `slug__in`, with the values sent to PostgreSQL as
    one array parameter (`slug = ANY(%s)`). An import looks up 1,000 task ids per batch: as an IN
    list that is 1,000 parameters for Django to compile and psycopg to bind in Python, twice the
    time of the query itself. Other databases get the IN list."""

    lookup_name = "any"
    prepare_rhs = False

    def get_prep_lookup(self):
        field = self.lhs.output_field
        return [field.get_prep_value(value) for value in self.rhs]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        values = [field.get_db_prep_value(value, connection, prepared=True) for value in self.rhs]
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", (*lhs_params, values)
        if not values:
            raise EmptyResultSet
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", (*lhs_params, *values)


models.Field.register_lookup(AnyOf)
models.ForeignKey.register_lookup(AnyOf)  # related fields keep lookups of their own: `task_id__any=keys`
