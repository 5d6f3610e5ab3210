"""Readable state colours on every theme: WCAG 2 contrast, and the nudge that reaches it.

The state colours come from theme variables (`$text-error`, `$text-success`, …, in
styles/main.tcss); some built-in themes make them faint on their own background
(`$text-warning` is 3.3:1 on textual-light). A colour below `MIN_CONTRAST` against the
background it is drawn on is moved towards black or white, whichever side reaches the
minimum, keeping its hue as far as it can.
"""

from __future__ import annotations

from textual.color import Color

#: WCAG 2 AA for normal text
MIN_CONTRAST = 4.5
_STEPS = 20


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(color: Color) -> float:
    return 0.2126 * _channel(color.r) + 0.7152 * _channel(color.g) + 0.0722 * _channel(color.b)


def contrast(a: Color, b: Color) -> float:
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def readable(color: Color, *backgrounds: Color, minimum: float = MIN_CONTRAST) -> Color:
    """`color`, or the least blend of it towards black or white that has at least
    `minimum` contrast on every one of `backgrounds` (the best reachable if none has)."""
    def worst(candidate: Color) -> float:
        return min(contrast(candidate, bg) for bg in backgrounds)

    if not backgrounds or worst(color) >= minimum:
        return color
    found: list[tuple[int, Color]] = []
    for target in (Color(0, 0, 0), Color(255, 255, 255)):
        for step in range(1, _STEPS + 1):
            candidate = color.blend(target, step / _STEPS)
            if worst(candidate) >= minimum:
                found.append((step, candidate))
                break
    if found:
        return min(found, key=lambda pair: pair[0])[1]
    return max((Color(0, 0, 0), Color(255, 255, 255)), key=worst)
