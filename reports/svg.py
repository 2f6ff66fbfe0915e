"""Matplotlib figures as inline SVG with hover values: the report's interactive figures, with no script.

A figure drawn here is saved as SVG text and put into the page as an `<svg>` element
(not an `<img>`: a browser shows the `<title>` of an element only in inline SVG).
Artists that carry a value get a gid through `Tips.tip`; after saving, each gid's
group receives a `<title>` child, which every browser shows as a tooltip, offline.
Every id in the SVG is prefixed with the figure's own key, so several figures on one
page never resolve each other's clip paths or markers.

    tips = Tips("curves")
    line, = ax.plot(x, y); tips.tip(line, "step 3: 0.742 s")
    View.drawn("Per-step curves", "caption", tips.svg(fig))
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # no display on CI or GPU runners

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

sns.set_theme(style="whitegrid", context="notebook")  # the same look as the PNG figures (figures.py)


@dataclass(frozen=True)
class View:
    """One figure of the report: drawn (`svg` set) or skipped with the reason shown in its place.

    `notes` name runs a drawn figure left out, and why."""

    title: str
    caption: str = ""
    svg: str | None = None
    reason: str = ""
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def drawn(cls, title: str, caption: str, svg: str, notes: list[str] | tuple[str, ...] = ()) -> View:
        return cls(title, caption, svg, "", tuple(notes))

    @classmethod
    def skipped(cls, title: str, reason: str) -> View:
        return cls(title, reason=reason)


class Tips:
    """Collects (artist, hover text) pairs of one figure and writes its SVG with a `<title>` per artist."""

    def __init__(self, key: str) -> None:
        if not re.fullmatch(r"[A-Za-z][\w-]*", key):
            raise ValueError(f"figure key {key!r}: letters, digits, '-' and '_' only")
        self.key = key
        self._texts: dict[str, str] = {}
        self._zones: set[str] = set()

    def tip(self, artist, text: str, *, zone: bool = False):
        """Give `artist` the hover `text`; returns the artist.

        zone: the artist is an invisible area (alpha 0, drawn as fill none) that still answers the pointer."""
        gid = f"tip{len(self._texts)}"
        artist.set_gid(gid)
        self._texts[gid] = text
        if zone:
            self._zones.add(gid)
        return artist

    def svg(self, fig: plt.Figure) -> str:
        """The figure as an `<svg>` element for inline use; closes the figure."""
        buffer = io.StringIO()
        with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": self.key}):  # text as <text>: small, selectable
            fig.savefig(buffer, format="svg", bbox_inches="tight")
        plt.close(fig)
        return self._finish(buffer.getvalue())

    def _finish(self, text: str) -> str:
        text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: not allowed inside HTML
        text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)  # creator and date: noise in a diff
        prefix = f"{self.key}-"
        text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m[1]}"', text)
        text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m[1]})", text)
        text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m[1]}"', text)
        for gid, tip in self._texts.items():
            opening = re.search(rf'<g id="{prefix}{gid}"[^>]*>', text)
            if opening is None:  # an invisible artist is not written at all
                continue
            head = opening[0][:-1] + (' pointer-events="all">' if gid in self._zones else ">")
            title = f"\n<title>{html.escape(tip, quote=False)}</title>"
            text = text[: opening.start()] + head + title + text[opening.end() :]
        # Scale with the page, keep the aspect (viewBox); the class lets the page style every figure alike.
        return re.sub(
            r'<svg ([^>]*?)width="([\d.]+)pt" height="([\d.]+)pt"',
            lambda m: (
                f'<svg class="figure" {m[1]}width="{m[2]}pt" height="{m[3]}pt" '
                f'role="img" aria-label="figure {self.key}"'
            ),
            text,
            count=1,
        )
