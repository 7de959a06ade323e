"""API parsers. Kept apart from gymwright.api: DRF imports its DEFAULT_PARSER_CLASSES while
rest_framework.views is being defined, and gymwright.api imports rest_framework.views, so a
parser living there is a circular import whenever gymwright.api is imported first."""

from rest_framework import exceptions
from rest_framework.parsers import JSONParser as _DRFJSONParser


class JSONParser(_DRFJSONParser):
    """DRF's JSON parser, except that a body nested too deeply is a parse error, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:  # the C decoder recurses once per level of nesting
            raise exceptions.ParseError("JSON parse error - nested too deeply to read.") from None
