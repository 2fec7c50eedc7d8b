"""``k=v,k2=v2`` (OTEL_RESOURCE_ATTRIBUTES' form, W3C Baggage's list): pairs in order, percent-decoded,
properties ignored; any malformed member raises, naming the member and not its value."""

from __future__ import annotations

import pytest

from collector.util.kv_pairs import MAX_TEXT, parse_pairs


def test_pairs_in_order_trimmed_decoded_a_later_key_winning() -> None:
    text = " team = platform , note=a%20b%2Cc;prop=1 ,team=infra, empty=, uni=%C3%A9,"
    assert parse_pairs(text) == {"team": "infra", "note": "a b,c", "empty": "", "uni": "é"}
    assert parse_pairs("") == {} and parse_pairs("   ") == {}


@pytest.mark.parametrize(("text", "member"), [
    ("a=1,novalue", 2),
    ("=1", 1),
    ("a b=1", 1),
    ("a=%zz", 1),
    ("a=1,b=%FF", 2),  # not UTF-8 once decoded
])
def test_a_malformed_member_raises_and_is_named(text: str, member: int) -> None:
    with pytest.raises(ValueError, match=f"member {member}") as info:
        parse_pairs(text)
    assert "%zz" not in str(info.value) and "%FF" not in str(info.value), "the value is not repeated"


def test_an_oversized_text_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than"):
        parse_pairs("a=" + "x" * MAX_TEXT)
