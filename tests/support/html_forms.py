"""What a browser would submit for a form on a page: read from the page's HTML with the standard library's parser.

A test that posts a form as a browser does must send what the page holds, not what the test believes it holds:
a textarea drops the one newline right after its start tag (HTML's parsing rule) and sends its line ends as CRLF,
an unchecked box sends nothing, a select sends its selected option (or its first)."""

from __future__ import annotations

from html.parser import HTMLParser


class _FormReader(HTMLParser):
    def __init__(self, form_id: str):
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._textarea: tuple[str, list[str]] | None = None
        self._select: tuple[str, list[tuple[str, bool]]] | None = None
        self._option: tuple[str | None, bool, list[str]] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.inside = attrs.get("id") == self.form_id
            return
        if not self.inside or attrs.get("disabled") is not None:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            kind = (attrs.get("type") or "text").lower()
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.fields.append((name, attrs.get("value") or "on"))
            elif kind not in ("file", "submit", "button", "reset", "image"):
                self.fields.append((name, attrs.get("value") or ""))
        elif tag == "textarea" and name:
            self._textarea = (name, [])
        elif tag == "select" and name:
            self._select = (name, [])
        elif tag == "option" and self._select is not None:
            self._option = (attrs.get("value"), "selected" in attrs, [])

    def handle_data(self, data):
        if self._textarea is not None:
            self._textarea[1].append(data)
        elif self._option is not None:
            self._option[2].append(data)

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "textarea" and self._textarea is not None:
            name, parts = self._textarea
            text = "".join(parts)
            text = text[1:] if text.startswith("\n") else text  # the parser drops one leading newline
            self.fields.append((name, text.replace("\r\n", "\n").replace("\n", "\r\n")))
            self._textarea = None
        elif tag == "option" and self._option is not None:
            value, selected, parts = self._option
            self._select[1].append((value if value is not None else "".join(parts), selected))
            self._option = None
        elif tag == "select" and self._select is not None:
            name, options = self._select
            chosen = [value for value, selected in options if selected] or [value for value, _ in options[:1]]
            self.fields += [(name, value) for value in chosen]
            self._select = None


def browser_form_data(html: str, form_id: str) -> dict:
    """The form `form_id`'s fields as a browser would post them ({name: value}, or {name: [values]} for a name
    sent more than once)."""
    reader = _FormReader(form_id)
    reader.feed(html)
    data: dict = {}
    for name, value in reader.fields:
        if name in data:
            data[name] = (data[name] if isinstance(data[name], list) else [data[name]]) + [value]
        else:
            data[name] = value
    return data
