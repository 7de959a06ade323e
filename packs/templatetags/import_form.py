"""The import page's form (templates/packs/import.html)."""

from django import template

from authoring import selectors as authoring_selectors
from packs.importer import DEFAULT_ENVIRONMENT

register = template.Library()


@register.simple_tag
def import_environment_choices(user, chosen: str = "") -> dict:
    """What the Environment field offers: every environment with a version (an import names one that exists, or
    none: rows without one then go to DEFAULT_ENVIRONMENT, made by the import when it does not exist). A name sent
    that is not among them (an API habit, a stale page) is offered too, so that the page shows what was sent next
    to the reason it was refused."""
    slugs = list(
        authoring_selectors.environment_list(user=user)
        .filter(latest_version__isnull=False)
        .order_by("slug")
        .values_list("slug", flat=True)
    )
    chosen = chosen or ""
    unknown = chosen if chosen not in slugs and len(chosen) <= 64 else ""  # longer: no id at all, not echoed
    return {
        "slugs": slugs,
        "chosen": chosen,
        "unknown": unknown,
        "default": DEFAULT_ENVIRONMENT,
        "default_exists": DEFAULT_ENVIRONMENT in slugs,
    }
