"""Streaming a pack archive to the browser or the API: never read into memory."""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.http import FileResponse, HttpResponseNotModified

from accounts import permissions
from gymwright.errors import NotAllowed
from packs.models import PackVersion


def pack_version_response(request, pack_version: PackVersion, *, on_send=None):
    """A streamed FileResponse with Content-Length, the sha256 (X-Checksum-SHA256) and an ETag;
    `on_send()` (the audit record) runs only when the archive is sent, not for a 304."""
    if not permissions.can_build_packs(request.user):
        raise NotAllowed("Only lab members and admins can download packs.")
    etag = f'"{pack_version.sha256}"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponseNotModified()
        response["ETag"] = etag
        return response
    if on_send is not None:
        on_send()
    handle = default_storage.open(pack_version.archive.name, "rb")
    response = FileResponse(handle, as_attachment=True, filename=pack_version.filename, content_type="application/gzip")
    response["Content-Length"] = str(pack_version.size)
    response["ETag"] = etag
    response["X-Checksum-SHA256"] = pack_version.sha256
    response["Cache-Control"] = "private, max-age=31536000, immutable"
    return response
