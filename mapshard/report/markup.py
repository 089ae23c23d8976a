"""HTML building blocks shared by report.html's sections (html.py, html_views.py)."""

from __future__ import annotations

import html


def escape(x: object) -> str:
    return html.escape(str(x), quote=True)


def table(
    header: list[str], rows: list[list[str]], text_cols: int = 1, narrow: bool = False
) -> str:
    """A table; the first `text_cols` columns are left-aligned text (long names break
    anywhere rather than widen the page), the rest numbers."""

    def cell(tag: str, i: int, v: str) -> str:
        cls = ' class="t"' if i < text_cols else ""
        return f"<{tag}{cls}>{escape(v)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows
    )
    cls = ' class="narrow"' if narrow else ""
    # in a box of its own that scrolls sideways if the table cannot wrap to the page
    return (
        f'<div class="tw"><table{cls}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
