"""Unit conversions on the way in: every source time becomes int64 ns, exactly.

Sources write µs as JSON floats or strings with up to 3 decimals (ns precision), sometimes more
(`53.7410625`), sometimes with a trailing tab for Excel. 1.7e15 µs with 3 decimals needs 19
significant digits and float64 has ~16, so the text is converted with integer arithmetic, never
through a float.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

import msgspec
import pyarrow as pa
import pyarrow.compute as pc


class BadTime(ValueError):
    """A time value that is not a number of µs (the importers report it with the file it is in)."""


def us_text_to_ns(text: bytes | str | msgspec.Raw) -> int | None:
    """µs as JSON number or string text (`12.345`, `"12.345\\t"`, `1e3`) → int ns; None if empty.
    `BadTime` if the text is not a number, or not an int64 of ns (beyond ±292 years of 1970)."""
    text = text.encode() if isinstance(text, str) else bytes(text)
    if 4 < len(text) <= 19 and text[-4] == 46 and text[:-4].isdigit() and text[-3:].isdigit():
        return int(text[:-4] + text[-3:])  # fast path: up to 15 digits, '.', 3 decimals (46 = ".")
    s = text.strip().strip(b'"').replace(b"\\t", b"").strip()
    if not s or s in (b"null", b"N/A"):
        return None
    whole, dot, frac = s.partition(b".")
    if whole.isdigit() and (not frac or frac.isdigit()):
        if len(frac) <= 3:
            ns = int(whole) * 1000 + (int(frac.ljust(3, b"0")) if frac else 0)
        else:
            ns = int(whole) * 1000 + int(frac[:3])
            rest = frac[3:]
            if rest[0] > ord("5") or (rest[0] == ord("5") and (rest.strip(b"0") != b"5" or ns % 2)):
                ns += 1  # round half to even, as Decimal below
    else:
        try:
            ns = int((Decimal(s.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, UnicodeDecodeError, ValueError, OverflowError):  # OverflowError: 'inf'
            raise BadTime(f"not a time in µs: {s[:40].decode(errors='replace')!r}") from None
    if not _NS_MIN <= ns <= _NS_MAX:
        raise BadTime(
            f"time out of range (ns beyond int64, ±292 years of 1970): {s[:40].decode(errors='replace')!r} µs"
        )
    return ns


_NS_MIN, _NS_MAX = -(1 << 63), (1 << 63) - 1


# µs text the bulk parser takes: 1 to 15 digits, '.', exactly 3 decimals (≤ 18 digits: fits int64).
_PLAIN_US = r"^[0-9]{1,15}\.[0-9]{3}$"


def us_texts_to_ns(texts: list) -> list[int | None]:
    """`us_text_to_ns` over a column, for the hot import path: one Arrow pass instead of a Python
    call per value. Plain `12.345` text becomes ns by dropping the '.' and casting the digits to
    int64 (exact, no float); anything else (more decimals, quotes, exponents) goes through
    `us_text_to_ns` one by one, so the results and errors are the same."""
    if not texts:
        return []
    # One buffer, split by Arrow: a JSON value's raw text has no literal newline unless it is an
    # object or array (not a time); then the split miscounts and each value is parsed alone.
    arr = pc.split_pattern(pa.array([b"\n".join(texts)], pa.binary()), b"\n").flatten()
    if len(arr) != len(texts):
        return [us_text_to_ns(t) for t in texts]
    return us_array_to_ns(arr).to_pylist()


def us_float_to_ns(value: float | int | None) -> int | None:
    """µs as an already-decoded number → int ns (for values small enough to be exact)."""
    if value is None:
        return None
    return int(round(value * 1000))


def us_array_to_ns(arr: pa.Array) -> pa.Array:
    """`us_text_to_ns` over an Arrow array (string or binary) of raw µs texts (NULL: absent), as an
    int64 array: plain `12.345` values in one Arrow pass, the others one by one (same results and
    errors)."""
    plain = pc.fill_null(pc.match_substring_regex(arr, _PLAIN_US), False)
    digits = pc.if_else(plain, pc.replace_substring(arr, ".", "", max_replacements=1), None)
    out = pc.cast(digits.cast(pa.string()), pa.int64())  # digits only: valid text either way
    odd = pc.and_(pc.invert(plain), pc.is_valid(arr))
    if not pc.any(odd).as_py():
        return out
    values = out.to_pylist()
    texts = arr.to_pylist()
    for i in pc.indices_nonzero(odd).to_pylist():
        values[i] = us_text_to_ns(texts[i])
    return pa.array(values, pa.int64())
