"""Writes. Every change to authoring data goes through one of these functions, one module per thing:
audit, blobs, documents (building and checking what a version stores), environments, tasks, imports (many
tasks at once) and hooks (what other apps do with every new task version, the environment fields they keep).

Versions are append-only: `task_version_create` and `environment_version_create` are the only code paths
that make content (with `tasks_bulk_create` for imports), and they never update a version row. Saving on
top of a version that is no longer the latest raises ConflictError; nothing is overwritten. Callers import
the functions from here (`from authoring import services`) or from their module.
"""

from authoring.services.audit import audit_record
from authoring.services.blobs import (
    blob_read,
    blob_store,
    files_with_uploads,
    safe_relative_path,
    upload_too_large_error,
)
from authoring.services.documents import (
    CONTENT_KEYS,
    DEFAULT_ENVIRONMENT_SPEC,
    ENVIRONMENT_KEYS,
    environment_limits_check,
    environment_spec_validate,
)
from authoring.services.environments import (
    CALIBRATION_FIELDS,
    environment_calibration_set,
    environment_create,
    environment_version_create,
    not_yours,
    settings_apply,
)
from authoring.services.hooks import (
    EnvironmentField,
    environment_field_register,
    environment_fields,
    environment_fields_related,
    environment_fields_write,
    task_version_created_hook,
)
from authoring.services.imports import BULK_CHUNK, IMPORT_MESSAGE, environment_version_import, tasks_bulk_create
from authoring.services.tasks import task_content_sha256, task_create, task_version_content, task_version_create

__all__ = [
    "audit_record",
    "blob_read",
    "blob_store",
    "files_with_uploads",
    "safe_relative_path",
    "upload_too_large_error",
    "CONTENT_KEYS",
    "DEFAULT_ENVIRONMENT_SPEC",
    "ENVIRONMENT_KEYS",
    "environment_limits_check",
    "environment_spec_validate",
    "task_version_created_hook",
    "CALIBRATION_FIELDS",
    "EnvironmentField",
    "environment_calibration_set",
    "not_yours",
    "settings_apply",
    "environment_field_register",
    "environment_fields",
    "environment_fields_related",
    "environment_fields_write",
    "environment_create",
    "environment_version_create",
    "task_content_sha256",
    "task_create",
    "task_version_content",
    "task_version_create",
    "BULK_CHUNK",
    "IMPORT_MESSAGE",
    "environment_version_import",
    "tasks_bulk_create",
]
