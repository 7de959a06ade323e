"""Static files storage: WhiteNoise's compressed, content-hashed storage, forgiving when missing.

`make serve` runs `collectstatic`, which writes gzip/brotli copies and hashed names into
STATIC_ROOT, so every page links e.g. ``css/app.3f2a9c.css`` cached for a year. Without a
collected manifest (`make run`, tests) a page still renders and links the plain name, which
WhiteNoise serves from the source folders.
"""

from __future__ import annotations

from django.conf import settings
from whitenoise.storage import CompressedManifestStaticFilesStorage

_URLS_KEPT = 1024  # names: the templates' own, a few dozen


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False
    # The rubric editor is native ES modules: rewrite their `import ... from "./x.js"` to the
    # hashed names too, so a page never mixes a new main.js with a year-cached old module.
    support_js_module_import_aggregation = True

    def hashed_name(self, name, content=None, filename=None):
        try:
            return super().hashed_name(name, content, filename)
        except ValueError:
            # A file referenced before collectstatic ran (or by a vendored library's CSS that
            # names a file it does not ship): link the plain name instead of failing the page.
            return name

    def url(self, name, force=False):
        """The URL of `name`, worked out once per process (the manifest is read once, at start): every page links
        the same few files, and each {% static %} cost ~35 µs of hashing names and joining URLs. Not with DEBUG,
        which links the plain names of files that may change under it."""
        if force or settings.DEBUG:
            return super().url(name, force)
        urls = self.__dict__.setdefault("_urls", {})
        url = urls.get(name)
        if url is None:
            url = super().url(name)
            if len(urls) < _URLS_KEPT:
                urls[name] = url
        return url
