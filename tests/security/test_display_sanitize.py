"""The sanitiser itself (console/sdd/sanitize.py): data in, display text out.

Properties over arbitrary text (hypothesis, surrogates included) and the corpus:
a one-line result has no character below 0x20, none in 0x7f–0x9f, no bidi control,
no zero-width character; a multi-line result keeps newlines only; the log filter
keeps SGR colours and nothing else that a terminal would obey."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from console.sdd.sanitize import (
    CELL_LIMIT,
    ELLIPSIS,
    data_text,
    display_text,
    json_display,
    sgr_only,
)
from tests.security.display_kit import EVIL, HOSTILE, OSC8_URL, OSC52_PAYLOAD, control_in

ANY_CHAR = st.characters(codec=None, exclude_categories=())  # surrogates, controls, all
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(list(HOSTILE.values())), st.text(ANY_CHAR)),
                        max_size=8).map("".join)
TEXTS = st.one_of(st.text(ANY_CHAR), HOSTILE_TEXT)
KEPT_SGR = re.compile(r"\x1b\[[0-9;]*m")


@settings(max_examples=400)
@given(TEXTS)
def test_one_line_output_has_no_control_at_all(text: str) -> None:
    shown = display_text(text)
    assert not control_in(shown) and "\n" not in shown and "\t" not in shown
    shown.encode("utf-8")  # a lone surrogate is escaped: the text can be printed


@settings(max_examples=400)
@given(TEXTS)
def test_multi_line_output_keeps_newlines_only(text: str) -> None:
    shown = display_text(text, multiline=True)
    assert not control_in(shown) and "\t" not in shown and "\r" not in shown
    assert shown.count("\n") >= text.count("\n")


@settings(max_examples=400)
@given(TEXTS)
def test_log_filter_leaves_only_sgr_and_its_text_is_clean(text: str) -> None:
    filtered = sgr_only(text)
    assert "\x1b" not in KEPT_SGR.sub("", filtered)  # every ESC left starts an SGR
    rendered = Text.from_ansi(filtered)
    assert not control_in(rendered.plain) and "\x1b" not in rendered.plain
    assert not any("conceal" in str(span.style) or "blink" in str(span.style)
                   for span in rendered.spans)


@settings(max_examples=300)
@given(st.dictionaries(TEXTS, st.one_of(TEXTS, st.lists(TEXTS, max_size=3)), max_size=4))
def test_json_output_is_the_same_value_with_no_control(value: dict) -> None:  # type: ignore[type-arg]
    text = json_display(json.dumps(value, indent=2, ensure_ascii=False))
    assert not control_in(text) and "\x1b" not in text
    text.encode("utf-8")
    assert json.loads(text) == value


@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))))
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert display_text(text) == text
    assert display_text(text, multiline=True) == text.expandtabs(8)
    assert sgr_only(text) == text


def test_each_kind_of_control_is_shown_as_a_visible_escape() -> None:
    assert display_text("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert display_text("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert display_text("a\r\nb\tc", multiline=True) == "a\nb       c"
    assert display_text("\x00\x7f\x9b\x85") == "\\x00\\x7f\\x9b\\x85"
    assert display_text("\u202eevil\u202c\u2066\u2069") == "\\u202eevil\\u202c\\u2066\\u2069"
    assert display_text("a\u200bb\u200dc\ufeff\u2028") == "a\\u200bb\\u200dc\\ufeff\\u2028"
    assert display_text("\ud800") == "\\ud800"
    assert display_text("tag\U000e0041") == "tag\\U000e0041"
    assert display_text(42) == "42"


def test_markup_is_text() -> None:
    for markup in ("[/]", "[link=https://x]y[/link]", "[bold red]z", "[$accent]v[/]"):
        assert display_text(markup) == markup
        assert data_text(markup).plain == markup and not data_text(markup).spans
    assert data_text("x", "bold").style == "bold"


def test_a_long_title_is_cut_with_an_ellipsis_before_it_is_escaped() -> None:
    title = "T" * 10_000 + EVIL
    shown = display_text(title, limit=CELL_LIMIT)
    assert len(shown) == CELL_LIMIT and shown.endswith(ELLIPSIS)
    escaped = display_text("\x1b" * 10_000, limit=20)
    assert len(escaped) == 20 and escaped.startswith("\\x1b\\x1b")
    assert display_text("short", limit=20) == "short"


def test_the_log_keeps_colours_and_drops_every_other_sequence() -> None:
    log = ("\x1b[31mred\x1b[0m \x1b[1;32mbold green\x1b[0m \x1b[38;5;8mgrey\x1b[m "
           "\x1b[38;2;1;2;3mrgb\x1b[0m " + EVIL)
    filtered = sgr_only(log)
    text = Text.from_ansi(filtered)
    styled = {text.plain[s.start:s.end]: str(s.style) for s in text.spans}
    assert styled["red"] == "color(1)"  # SGR 31
    assert "bold" in styled["bold green"] and "color(2)" in styled["bold green"]
    assert "color(8)" in styled["grey"]  # 38;5;8 is a colour, not conceal
    assert "#010203" in styled["rgb"]
    for gone in (OSC52_PAYLOAD, OSC8_URL, "owned", "1$r0m", "Gf=100", "\x9b", "\x9d"):
        assert gone not in filtered, gone
    assert "hidden text" in text.plain  # the concealed text is visible
    assert "\\u202e" in text.plain and "\\x00" in text.plain  # the rest: visible escapes


def test_sgr_parameters_that_hide_or_blink_are_dropped() -> None:
    assert sgr_only("\x1b[8mx") == "x"
    assert sgr_only("\x1b[1;8;31mx") == "\x1b[1;31mx"
    assert sgr_only("\x1b[5;6mx") == "x"
    assert sgr_only("\x1b[38:2::1:2:3mx") == "x"  # colon sub-parameters: not parsed, dropped
    assert sgr_only("\x1b[?25lx\x1b[2Jy\x1bcz") == "xyz"


def test_an_unterminated_string_sequence_ends_at_its_line() -> None:
    assert sgr_only(f"a\x1b]52;c;{OSC52_PAYLOAD}\nnext line") == "a\nnext line"
    assert sgr_only("a\x1bP never closed\nb") == "a\nb"
    assert sgr_only("bare escape at the end\x1b") == "bare escape at the end"
