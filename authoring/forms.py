from __future__ import annotations

import json
import math

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from authoring.models import SLUG_RULE, Environment, Task, slug_validator
from authoring.services import DEFAULT_ENVIRONMENT_SPEC as DEFAULTS
from grading.engine.models import BUILTIN_TOOLS, PROMPT_MAX_CHARS, TAG_MAX_CHARS
from gymwright.egress_setting import egress_refusal
from gymwright.forms import pointer_head
from gymwright.text import unix_newlines


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 reads as infinity, which no JSON column can store
        raise ValueError(f"the number {text[:40]} is too large")
    return value


# The editor's bound on a prompt is the task format's (grading.engine.models.PROMPT_MAX_CHARS), shown as the
# textarea's maxlength so that a browser stops the author first.


class ExactTextField(forms.CharField):
    """Multi-line text kept exactly as typed: nothing stripped (a script's final newline, a prompt's leading blank
    line and indentation are content). Line ends are saved as "\n", as the task format says (docs/formats.md): a
    browser sends a textarea with CRLF, and the same text sent through the API has LF, so both must hash the same.
    They are made "\n" before `max_length` is checked, so that the limit counts what a browser's `maxlength`
    counts and what is stored."""

    def __init__(self, **kwargs):
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        return unix_newlines(value)


def parse_json_field(text: str, *, label: str):
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"{label} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.")
    except ValueError as exc:  # NaN/Infinity, a huge float, an integer over Python's 4300-digit limit
        raise forms.ValidationError(f"{label} is not valid JSON: {str(exc)[:200]}.")
    except RecursionError:  # the C decoder recurses once per level of nesting
        raise forms.ValidationError(f"{label} is nested too deeply to read.")


def pointer_to_form_field(pointer: str) -> str | None:
    """Which form field a JSON pointer into the task document belongs to."""
    return {
        "rubric": "rubric",
        "title": "title",
        "prompt": "prompt",
        "tags": "tags",
        "files": "files",
        "solution": "solution_script",
        "metadata": "metadata",
        "slug": "slug",
        "environment": "environment",
        "examples": "examples",
        "environment_version": "environment_version",
        "id": "slug",
    }.get(pointer_head(pointer))


FILE_ROLE_CHOICES = [
    ("workspace", "workspace — the agent may change it"),
    ("protected", "protected — restored before the checks"),
    ("grader", "grader — hidden until the checks"),
]


class FileRolesMixin:
    """The role select per attached file (`file_role_<index>`), shared by the task and environment forms."""

    UPLOAD_ROLE_PREFIX = "upload_role:"  # + an attached file's name: its role, chosen as it is attached

    def upload_roles(self) -> dict[str, str]:
        """{file name: role} for the files this save attaches (the page's role select per chosen file, written by
        static/js/file_roles.js), so that a task's v1 can protect its tests. An unknown role is a form error."""
        roles = {}
        allowed = {value for value, _ in FILE_ROLE_CHOICES}
        for key in self.data.keys() if hasattr(self.data, "keys") else ():
            if not key.startswith(self.UPLOAD_ROLE_PREFIX):
                continue
            role = self.data.get(key) or "workspace"
            name = key[len(self.UPLOAD_ROLE_PREFIX) :]
            if role not in allowed:
                raise forms.ValidationError(
                    f"{name}: the role {role[:40]!r} is not one of {', '.join(sorted(allowed))}."
                )
            roles[name] = role
        return roles

    def _with_role(self, index: int, entry: dict) -> dict:
        if f"file_role_{index}" not in self.fields:  # a file this save attaches: its role came with it
            return entry
        role = self.cleaned_data.get(f"file_role_{index}") or None
        entry = {key: value for key, value in entry.items() if key != "role"}
        # An unset role means workspace: leaving it unset keeps older documents' bytes (and sha256).
        had_role = index < len(self.current_files) and self.current_files[index].get("role")
        if role and (role != "workspace" or had_role):
            entry["role"] = role
        return entry


class TaskForm(FileRolesMixin, forms.Form):
    """The task editor. The rubric arrives as raw JSON (the structured view writes it)."""

    # A problem inside one of these is said at its pointer (gymwright.forms.form_add_domain_error).
    json_fields = ("rubric", "metadata", "examples")

    slug = forms.CharField(max_length=64, validators=[slug_validator], help_text=f"{SLUG_RULE}; cannot change later.")
    environment = forms.ModelChoiceField(queryset=Environment.objects.none(), to_field_name="slug")
    environment_version = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label="Environment version"
    )
    title = forms.CharField(max_length=200)
    prompt = ExactTextField(
        max_length=PROMPT_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown shown to the agent."
    )
    rubric = ExactTextField(widget=forms.Textarea(attrs={"rows": 24, "id": "rubric-json", "spellcheck": "false"}))
    solution_script = ExactTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        label="Reference solution script",
        help_text="Shell commands run in the sandbox by the oracle policy.",
    )
    solution_answer = ExactTextField(required=False, widget=forms.Textarea(attrs={"rows": 4}), label="Reference answer")
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    metadata = ExactTextField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), initial="{}", help_text="Free-form JSON object."
    )
    examples = ExactTextField(
        required=False,
        label="Example answers",
        initial="[]",
        widget=forms.Textarea(attrs={"rows": 8, "id": "examples-json", "spellcheck": "false"}),
        help_text="JSON list: answers with the verdict you expect, graded on every new version, e.g. "
        '[{"name": "right", "answer": "42", "expect": "pass", "reward": {"min": 0.9}}, '
        '{"name": "wrong", "answer": "41", "expect": "fail", '
        '"files": [{"path": "out/report.md", "content": "..."}]}]',
    )
    files = MultipleFileField(
        required=False, label="Attach files", help_text="Placed in the agent's workspace under their names."
    )
    remove_files = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Remove attached files"
    )
    message = forms.CharField(required=False, max_length=500, label="Change note")
    base_version = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, editing: Task | None = None, environments=None, current_files=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.editing = editing
        if environments is not None:
            self.fields["environment"].queryset = environments
        if editing is not None:
            del self.fields["slug"]
            del self.fields["environment"]
            choices = [("", f"latest (v{editing.environment.latest_version.number})")]
            choices += [(str(v.number), f"v{v.number}") for v in editing.environment.versions.order_by("-number")]
            self.fields["environment_version"].choices = choices
        else:
            del self.fields["environment_version"]
            del self.fields["remove_files"]
        if "remove_files" in self.fields:
            self.fields["remove_files"].choices = [(f["path"], f["path"]) for f in current_files]
        self.current_files = list(current_files)
        for index, entry in enumerate(self.current_files):
            self.fields[f"file_role_{index}"] = forms.ChoiceField(
                choices=FILE_ROLE_CHOICES,
                required=False,
                initial=entry.get("role") or "workspace",
                label=f"Role of {entry['path']}",
                widget=forms.Select(attrs={"data-file-path": entry["path"]}),
            )

    def fields_to_fix(self) -> int:
        """How many fields hold an error: the error summary's headline (its own sentence on top is not a field)."""
        return sum(1 for name in self.errors if name != NON_FIELD_ERRORS)

    def file_role_fields(self):
        return [self[name] for name in self.fields if name.startswith("file_role_")]

    def clean(self):
        cleaned = super().clean()
        try:
            cleaned["upload_roles"] = self.upload_roles()
        except forms.ValidationError as error:
            self.add_error("files", error)
        return cleaned

    def clean_title(self):
        title = self.cleaned_data["title"]
        # A title saved with spaces around it (through an import) is shown as it is, and the box gives it back
        # stripped: that alone changes nothing, so it must make no new version.
        latest = self.editing.latest_version if self.editing is not None else None
        current = latest.spec.get("title") if latest is not None else None
        return current if isinstance(current, str) and current.strip() == title else title

    def clean_rubric(self):
        return parse_json_field(self.cleaned_data["rubric"], label="The rubric")

    def clean_metadata(self):
        text = (self.cleaned_data.get("metadata") or "").strip() or "{}"
        value = parse_json_field(text, label="Metadata")
        if not isinstance(value, dict):
            raise forms.ValidationError("Metadata must be a JSON object.")
        return value

    def clean_examples(self):
        text = (self.cleaned_data.get("examples") or "").strip() or "[]"
        value = parse_json_field(text, label="Example answers")
        if not isinstance(value, list):
            raise forms.ValidationError("Example answers must be a JSON list of objects.")
        return value

    def clean_tags(self):
        tags = sorted({t.strip().lower() for t in (self.cleaned_data.get("tags") or "").split(",") if t.strip()})
        long = [tag for tag in tags if len(tag) > TAG_MAX_CHARS]
        if long:  # the task format's bound (and the tag table's column), said in the box's words
            raise forms.ValidationError(
                f"A tag is at most {TAG_MAX_CHARS} characters: {long[0][:TAG_MAX_CHARS]}… has {len(long[0])}."
            )
        return tags

    def content(self, *, current_files: list[dict]) -> dict:
        data = self.cleaned_data
        removed = set(data.get("remove_files") or [])
        return {
            "title": data["title"],
            "prompt": data["prompt"],
            "rubric": data["rubric"],
            "solution": {"script": data.get("solution_script") or None, "answer": data.get("solution_answer") or None},
            "files": [self._with_role(index, f) for index, f in enumerate(current_files) if f["path"] not in removed],
            "tags": data["tags"],
            "metadata": data["metadata"],
            "examples": data.get("examples") or [],
        }

    @staticmethod
    def field_for(pointer: str) -> str | None:
        """The field a JSON pointer into the task document belongs to (for form_add_domain_error)."""
        name = pointer_to_form_field(pointer)
        return "solution_answer" if name == "solution_script" and pointer.startswith("/solution/answer") else name


class EnvironmentForm(FileRolesMixin, forms.Form):
    json_fields = ("custom_tools",)

    slug = forms.CharField(max_length=64, validators=[slug_validator], help_text=f"{SLUG_RULE}; cannot change later.")
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    image = forms.CharField(required=False, help_text="Container image (docker backend), e.g. python:3.12-slim.")
    dockerfile = ExactTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="Instead of an image: built once and cached by content hash.",
    )
    setup = ExactTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Shell script run once when a sandbox starts.",
    )
    network = forms.ChoiceField(choices=[("none", "none"), ("allowed", "allowed")], initial=DEFAULTS["network"])
    cpus = forms.FloatField(min_value=0.1, max_value=64, initial=DEFAULTS["limits"]["cpus"])
    memory_mb = forms.IntegerField(min_value=64, max_value=262144, initial=DEFAULTS["limits"]["memory_mb"])
    timeout_s = forms.IntegerField(min_value=1, max_value=86400, initial=DEFAULTS["limits"]["timeout_s"])
    max_steps = forms.IntegerField(min_value=1, max_value=1000, initial=DEFAULTS["limits"]["max_steps"])
    tools = forms.MultipleChoiceField(
        choices=[(tool, tool) for tool in BUILTIN_TOOLS],
        widget=forms.CheckboxSelectMultiple,
        initial=list(DEFAULTS["tools"]),
    )
    custom_tools = ExactTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        initial="[]",
        help_text='JSON list: [{"name", "description", "parameters", "command"}].',
    )
    checks_module = ExactTextField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text='Optional Python module `checks` for python checks (function: "checks:fn").',
    )
    files = MultipleFileField(required=False, label="Shared data files", help_text="Mounted read-only at /env.")
    message = forms.CharField(required=False, max_length=500, label="Change note")
    base_version = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, editing: Environment | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.editing = editing
        if editing is not None:
            del self.fields["slug"]
        refusal = egress_refusal()
        if refusal:
            # Say it before the save refuses it.
            self.fields["network"].help_text = f"'allowed' will be refused: {refusal}."

    @staticmethod
    def initial_from(environment: Environment) -> dict:
        """The form's values for editing `environment`'s latest version (what it leaves out: the defaults)."""
        spec = {**DEFAULTS, **environment.latest_version.spec}
        limits = {**DEFAULTS["limits"], **(spec.get("limits") or {})}
        return {
            "name": environment.name,
            "description": environment.description,
            "image": spec["image"] or "",
            "dockerfile": spec["dockerfile"] or "",
            "setup": spec["setup"] or "",
            "network": spec["network"] or DEFAULTS["network"],
            **{key: limits[key] for key in ("cpus", "memory_mb", "timeout_s", "max_steps")},
            "tools": spec["tools"] or [],
            "custom_tools": json.dumps(spec["custom_tools"] or [], indent=2),
            "checks_module": spec["checks_module"] or "",
            "base_version": environment.latest_version.number,
        }

    def clean(self):
        """What a save would refuse in the spec itself (a custom tool, the checks module, this server's ceilings,
        the network) is said in the same answer as the fields' own errors, not one round of them after another:
        the spec is checked here with each field in error at its default, and a problem is shown only at a field
        not in error already. The save checks the whole spec again."""
        from authoring.services import environment_limits_check, environment_spec_validate
        from gymwright.errors import DomainError
        from gymwright.forms import form_add_domain_error

        cleaned = super().clean()
        data = {**self.initial_values(), **cleaned}
        if not isinstance(data.get("custom_tools"), list):
            data["custom_tools"] = []
        spec = self.spec(current_files=[], data=data)
        refused = []
        try:  # the ceilings first: the spec's own check stops at its first kind of problem
            environment_limits_check(spec)
        except DomainError as exc:
            refused.append(exc)
            spec["limits"] = dict(DEFAULTS["limits"])
        try:
            environment_spec_validate(spec)
        except DomainError as exc:
            refused.append(exc)
        for exc in refused:
            kept = [d for d in exc.details if self.field_for(str(d.get("pointer") or "")) not in self.errors]
            if kept or not exc.details:
                form_add_domain_error(
                    self, DomainError(exc.message, code=exc.code, details=kept), field_for=self.field_for
                )
        return cleaned

    def initial_values(self) -> dict:
        """Each field's default, as `spec` reads cleaned values."""
        return {
            "network": DEFAULTS["network"],
            **DEFAULTS["limits"],
            "tools": list(DEFAULTS["tools"]),
            "custom_tools": [],
        }

    def clean_custom_tools(self):
        text = (self.cleaned_data.get("custom_tools") or "").strip() or "[]"
        value = parse_json_field(text, label="Custom tools")
        if not isinstance(value, list):
            raise forms.ValidationError("Custom tools must be a JSON list.")
        return value

    def spec(self, *, current_files: list[dict], data: dict | None = None) -> dict:
        data = self.cleaned_data if data is None else data
        return {
            "image": data.get("image") or None,
            "dockerfile": data.get("dockerfile") or None,
            "setup": data.get("setup") or None,
            "network": data["network"],
            "limits": {
                "cpus": data["cpus"],
                "memory_mb": data["memory_mb"],
                "timeout_s": data["timeout_s"],
                "max_steps": data["max_steps"],
            },
            "tools": list(data["tools"]),
            "custom_tools": data["custom_tools"],
            "files": current_files,
            "checks_module": data.get("checks_module") or None,
        }

    @staticmethod
    def field_for(pointer: str) -> str | None:
        """The field a JSON pointer into the environment spec belongs to: "/limits/cpus" → cpus."""
        parts = pointer.split("/")
        return parts[2] if len(parts) > 2 and parts[1] == "limits" else pointer_head(pointer)
