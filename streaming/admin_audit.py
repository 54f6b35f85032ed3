"""The audit log in the admin (docs/security.md, "Audit log"): listed and filtered, read-only
for everyone (the model and the database refuse changes), exported as CSV as filtered; and the
admin pages whose changes it records, each save or delete one row with before and after."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import path
from django.utils import timezone

from streaming.http import audit
from streaming.models import AuditEntry


def _values(obj: Model, fields: tuple[str, ...]) -> dict[str, Any]:
    """`fields` of `obj`, a many-to-many as the sorted names (`audit.record` writes the rest
    as text where JSON has no type for it)."""
    values = {}
    for name in fields:
        value = getattr(obj, name)
        if hasattr(value, "all"):  # a many-to-many manager
            value = sorted(str(each) for each in value.all()) if obj.pk else []
        values[name] = value
    return values


class Audited:
    """A ModelAdmin mixin: each add, change and delete of `audited_fields` writes one row."""

    audited_fields: tuple[str, ...] = ()

    def save_model(self, request: HttpRequest, obj: Model, form, change: bool) -> None:
        """Saved, its values before kept for the row (written once many-to-many are saved)."""
        before = _values(type(obj).objects.get(pk=obj.pk), self.audited_fields) if change else {}
        obj._audit_before = before
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        """Its many-to-many saved too: the row, where anything audited changed."""
        super().save_related(request, form, formsets, change)  # type: ignore[misc]
        obj = form.instance
        after = _values(obj, self.audited_fields)
        changes = audit.changes_of(getattr(obj, "_audit_before", {}), after)
        if changes:
            audit.record(request, audit.SETTING_CHANGED, target=self._target(obj), changes=changes)

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        """Deleted: the row says what it was."""
        before, target = _values(obj, self.audited_fields), self._target(obj)
        super().delete_model(request, obj)  # type: ignore[misc]
        audit.record(request, audit.SETTING_CHANGED, target=target, changes=_gone(before))

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        """Several deleted at once (the list's action): one row each."""
        gone = [(self._target(obj), _values(obj, self.audited_fields)) for obj in queryset]
        super().delete_queryset(request, queryset)  # type: ignore[misc]
        for target, before in gone:
            audit.record(request, audit.SETTING_CHANGED, target=target, changes=_gone(before))

    @staticmethod
    def _target(obj: Model) -> str:
        return f"{obj._meta.verbose_name} {obj.pk}: {obj}"


def _gone(before: dict[str, Any]) -> dict[str, list]:
    return {name: [value, None] for name, value in before.items()}


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Who did what, when, from where; filtered by act, date and actor, exported as shown."""

    list_display = ("at", "action", "actor_name", "actor", "address", "target", "detail")
    list_filter = ("action", ("at", admin.DateFieldListFilter))
    search_fields = ("=actor", "actor_name", "=address", "target")
    search_help_text = "An actor (user:<id>, key:<id>, ip:<address>), a name, an address, a target."
    date_hierarchy = "at"
    readonly_fields = (
        "at",
        "action",
        "actor",
        "actor_name",
        "address",
        "target",
        "changes",
        "detail",
    )
    change_list_template = "admin/streaming/auditentry/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_urls(self):
        """The list's CSV export, before the admin's own."""
        export = self.admin_site.admin_view(self.export)
        return [path("export.csv", export, name="streaming_auditentry_export"), *super().get_urls()]

    def export(self, request: HttpRequest) -> StreamingHttpResponse:
        """The rows the list shows now (its filters and search), all pages, as CSV."""
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        rows = self.get_changelist_instance(request).get_queryset(request).iterator()
        response = StreamingHttpResponse(audit.csv_lines(rows), content_type="text/csv")
        name = f"audit-{timezone.now():%Y%m%d-%H%M%S}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
