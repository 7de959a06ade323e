"""Roles are groups: author, reviewer, admin, lab. Superusers count as admin.

A lab member reads approved work (tasks that a reviewer approved, and of them only the approved versions),
builds and downloads packs, and edits nothing. Authors, reviewers and admins read every task and version."""

from __future__ import annotations

from gymwright.sql import Prepared

AUTHOR, REVIEWER, ADMIN, LAB = "author", "reviewer", "admin", "lab"
ROLES = (AUTHOR, REVIEWER, ADMIN, LAB)


def _role_names(user_id):
    from django.contrib.auth.models import Group

    return Group.objects.filter(user__id=user_id, name__in=ROLES).values_list("name", flat=True)


_role_rows = Prepared(_role_names, user_id=int)  # compiled once (gymwright.sql)
_ROLE_FLAG = "gymwright_role_"


def with_roles(queryset, user_field: str = "pk"):
    """`queryset` with the roles of the user it loads (`user_field` names that user's key): one flag a role, read in
    the same query, so that a request which loads its user (the session's, or an API token's) needs no query for
    its roles. `roles_known` then keeps them on the user."""
    from django.contrib.auth import get_user_model
    from django.db.models import Exists, OuterRef

    memberships = get_user_model().groups.through.objects.filter(user_id=OuterRef(user_field))
    return queryset.annotate(**{_ROLE_FLAG + role: Exists(memberships.filter(group__name=role)) for role in ROLES})


def roles_known(user, flags_from=None):
    """Keep on `user` the roles `with_roles` read (onto `flags_from`, the object the query loaded, by default the
    user itself). Returns the user."""
    source = user if flags_from is None else flags_from
    user._gymwright_roles = _with_superuser(user, {role for role in ROLES if getattr(source, _ROLE_FLAG + role)})
    return user


def _with_superuser(user, roles: set[str]) -> set[str]:
    if user.is_superuser:
        roles.add(ADMIN)
    return roles


def roles_of(user) -> set[str]:
    if not user or not user.is_authenticated or not user.is_active:
        return set()
    cached = getattr(user, "_gymwright_roles", None)
    if cached is None:
        cached = _with_superuser(user, set(_role_rows(user_id=user.pk)))
        user._gymwright_roles = cached
    return cached


def is_admin(user) -> bool:
    return ADMIN in roles_of(user)


def can_view(user) -> bool:
    """Any member with a role may read environments, and tasks as `reads_drafts` says."""
    return bool(roles_of(user))


def reads_drafts(user) -> bool:
    """Authors, reviewers and admins read every task version; a member who is only `lab` reads approved ones."""
    return bool(roles_of(user) & {AUTHOR, REVIEWER, ADMIN})


def can_run_previews(user) -> bool:
    """Start and cancel preview rollouts: authors, reviewers and admins (a lab member edits nothing)."""
    return bool(roles_of(user) & {AUTHOR, REVIEWER, ADMIN})


def can_author(user) -> bool:
    return bool(roles_of(user) & {AUTHOR, ADMIN})


def can_edit_task(user, task) -> bool:
    return is_admin(user) or (AUTHOR in roles_of(user) and task.owner_id == user.id)


def can_edit_environment(user, environment) -> bool:
    return is_admin(user) or (AUTHOR in roles_of(user) and environment.owner_id == user.id)


def can_review(user) -> bool:
    return bool(roles_of(user) & {REVIEWER, ADMIN})


def can_build_packs(user) -> bool:
    """Build and download task packs: lab members and admins."""
    return bool(roles_of(user) & {LAB, ADMIN})
