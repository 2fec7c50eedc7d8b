"""The value checks a masking rule can name: is what it matched a real secret, or a placeholder, a
variable, a call, a type or an English word? Each takes the match and the part to be replaced."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable

Check = Callable[[re.Match[str], str], bool]

_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
      <[^<>]*> | \{\{.*\}\}? | \$\{\{.* | \{[A-Za-z_][\w.]*\} | \$[{(]?[A-Za-z_][\w.]*[})]? | \$\(.*
      | %\(?\w*\)?[sd] | %[A-Za-z_]+% | <%.*%> | @[A-Za-z_]\w*@ | ![A-Za-z_][\w!]*
      | [*x.•·_#?-]{3,} | \[(?:REDACTED|HMAC)[^\]]*\]? | REDACTED
      | (?:your|my|the|some|insert|enter|replace|put|add)[\s_-].*
      | .*(?:[_-]here|[_-]goes[_-]here|[_-]placeholder)
      | (?:change|replace)[_-]?(?:me|this)
      | none | null | nil | true | false | undefined | empty | required | optional | unset | omitted | hidden
      | string | str | int | bool | bytes | any | object | secretstr | text | number
      | secret | secrets | password | passwd | passphrase | token | key | value | example | sample | test
      | dummy | placeholder | redacted | masked | foo | bar | baz | env | environ | getenv | xxx+
    )$"""
)
_SIGIL_NAME = re.compile(r"^[%@&*#][A-Za-z_]\w*%?$")  # %VAR%, @var, &ref, *ptr, #comment
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_CODE_NAME = re.compile(r"^(?:[a-z_]+|[A-Z_]+|[a-z]+(?:[A-Z][a-z]*)+|(?:[A-Z][a-z]+)+)$")
_PASSWORD_KEYS = ("password", "passwd", "passphrase", "pass", "pwd")
_SHELL_DIRS = ("pwd", "oldpwd")


def shannon(text: str) -> float:
    """Entropy in bits per character."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def char_classes(text: str) -> int:
    """How many of lower case, upper case, digits and other characters ``text`` uses."""
    return (any(c.islower() for c in text) + any(c.isupper() for c in text) + any(c.isdigit() for c in text)
            + any(not c.isalnum() for c in text))


def is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value.strip()))


def looks_made_up(value: str) -> bool:
    """Not an English or code word: digits with letters, mixed case inside, or symbols."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    symbol = any(not c.isalnum() and c not in "-_." for c in value)
    return (has_digit and has_alpha) or inner_upper or symbol or (has_digit and len(value) >= 6)


def placeholder(match: re.Match[str], value: str) -> bool:
    return not is_placeholder(value)


def basic_credentials(match: re.Match[str], value: str) -> bool:
    """Base64 of ``user:password`` in printable text."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep and user and password) and decoded.isprintable()


def _full_key(match: re.Match[str]) -> str:
    """The whole name before the separator: the match starts at its secret-like ending (DB_|PASSWORD)."""
    start = match.start("key")
    text = match.string
    begin = start
    while begin > 0 and start - begin < 64 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-"):
        begin -= 1
    return text[begin:match.end("key")]


def _following(match: re.Match[str]) -> str:
    end = match.end("secret")
    return match.string[end:end + 1]


def _spaced(match: re.Match[str]) -> bool:
    start, end = match.span("sep")
    text = match.string
    return text[start - 1:start].isspace() or text[end:end + 1].isspace()


def _unquoted_is_reference(match: re.Match[str], value: str, key: str) -> bool:
    """A call, subscript, attribute path, shell variable, or a code name where the syntax says code."""
    if _following(match) in ("(", "[") or value[0] == "$" or _SIGIL_NAME.match(value):
        return True
    if _DOTTED.match(value):
        return True
    if not _CODE_NAME.match(value):
        return False
    if match.group("kq"):  # "password": pw  is a dict with a variable in it
        return True
    sep = match.group("sep")
    if sep == ":":  # YAML: a word is a literal, but a capitalised one after a name is a type hint
        return value[0].isupper() and not value.isupper()
    return _spaced(match) or any(c.islower() for c in key)


def assignment(match: re.Match[str], value: str) -> bool:
    """``NAME = value``: a real value (not a placeholder, call, variable, type); passwords may be short
    words, tokens and keys must look made up."""
    key = _full_key(match).lower().strip("._-")
    if not value.strip() or is_placeholder(value) or key in _SHELL_DIRS:
        return False
    if not match.group("vq") and _unquoted_is_reference(match, value, key):
        return False
    if key.endswith(_PASSWORD_KEYS):
        return len(value) >= 3
    return len(value) >= 8 and looks_made_up(value)


def flag(match: re.Match[str], value: str) -> bool:
    """``--password X``: after a space the value must look made up (prose says "the --password flag")."""
    if is_placeholder(value) or _following(match) in ("(", "["):
        return False
    if match.group("sep").strip() == "" and not match.group("vq"):
        return looks_made_up(value)
    return len(value) >= 3


def userpass(match: re.Match[str], value: str) -> bool:
    """``-u user:password``: not a placeholder, not ``uid:gid``."""
    return not is_placeholder(value) and not value.isdigit() and len(value) >= 3


def prose(match: re.Match[str], value: str) -> bool:
    """"the password is hunter2": a made-up value, not a word."""
    return not is_placeholder(value) and looks_made_up(value) and not _DOTTED.match(value)


CHECKS: dict[str, Check] = {
    "placeholder": placeholder,
    "basic": basic_credentials,
    "assignment": assignment,
    "flag": flag,
    "prose": prose,
    "userpass": userpass,
}
