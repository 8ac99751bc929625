"""The page's small pieces: escaping, anchors, images as data URIs (the page is one self-contained file)."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

#: Image files the page embeds, by suffix.
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml", ".gif": "image/gif"}


def escape(value: Any) -> str:
    """Text from a file as HTML: every ``<``, ``>``, ``&`` and quote escaped."""
    return html.escape(str(value), quote=True)


def slug(text: str) -> str:
    """An anchor id from a name: lower-case letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "result"


def is_image(path: Path) -> bool:
    return path.suffix.lower() in MIME


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_uri(path: Path) -> str | None:
    """The image file as a data URI; None when it is missing or not an image."""
    mime = MIME.get(path.suffix.lower())
    if mime is None or not path.is_file():
        return None
    return data_uri(path.read_bytes(), mime)


def figure(caption: str, uri: str | None, source: str = "") -> str:
    """A captioned image; a note in its place when ``uri`` is None (the file was not found)."""
    named = f" ({escape(source)})" if source else ""
    if uri is None:
        return f'<p class="note">figure not found: {escape(source or caption)}</p>'
    return (
        f'<figure><img alt="{escape(caption)}" src="{uri}"><figcaption>{escape(caption)}{named}</figcaption></figure>'
    )


def bullets(items: list[str]) -> str:
    """Already-escaped items as a compact list ("" when there are none)."""
    if not items:
        return ""
    return '<ul class="compact">' + "".join(f"<li>{item}</li>" for item in items) + "</ul>"
