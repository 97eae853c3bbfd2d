"""agl-canon/1 (docs/agl-binding.md section 2): exact JSON values and their
canonical encoding.

Values are the JSON model with exact numbers: dict, list, str, int,
decimal.Decimal (a literal with a fraction or exponent), bool and None.
"""

import decimal
import hashlib
import json

CANON_VERSION = "agl-canon/1"
MAX_DIGITS = 100
MAX_NESTING = 64


class CanonError(ValueError):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise CanonError("duplicate object key %r" % k)
        out[k] = v
    return out


def _exact_float(lit):
    return decimal.Decimal(lit)


def parse(raw):
    """Parse JSON bytes into exact values; duplicate keys and invalid UTF-8
    are refused."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise CanonError("invalid UTF-8")
    else:
        text = raw
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_exact_float, parse_int=int,
                          parse_constant=_refuse_constant)
    except CanonError:
        raise
    except ValueError as e:
        raise CanonError(str(e))


def _refuse_constant(name):
    raise CanonError("not a JSON number: %s" % name)


def number(v):
    """The canonical (tag, text) of an exact number."""
    if isinstance(v, bool):
        raise CanonError("not a number")
    if isinstance(v, int):
        s = str(v)
        if len(s.lstrip("-")) > MAX_DIGITS:
            raise CanonError("number out of range")
        return "int", s
    d = decimal.Decimal(v)
    if not d.is_finite():
        raise CanonError("number not finite")
    sign, digits, exp = d.as_tuple()
    digits = "".join(str(x) for x in digits).lstrip("0")
    if digits == "":
        return "int", "0"
    while digits.endswith("0"):
        digits = digits[:-1]
        exp += 1
    neg = "-" if sign else ""
    if exp >= 0:
        if len(digits) + exp > MAX_DIGITS:
            raise CanonError("number out of range")
        return "int", neg + digits + "0" * exp
    point = len(digits) + exp
    if point > 0:
        return "dec", neg + digits[:point] + "." + digits[point:]
    if -point + len(digits) > MAX_DIGITS:
        raise CanonError("number out of range")
    return "dec", neg + "0." + "0" * (-point) + digits


def _string(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif c < 0x20:
            out.append("\\u00%02x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode(v, depth, out):
    if depth > MAX_NESTING:
        raise CanonError("nesting too deep")
    if v is None:
        out.append('["null"]')
    elif v is True:
        out.append('["bool",true]')
    elif v is False:
        out.append('["bool",false]')
    elif isinstance(v, (int, decimal.Decimal)):
        tag, text = number(v)
        out.append('["%s","%s"]' % (tag, text))
    elif isinstance(v, str):
        out.append('["str",' + _string(v) + "]")
    elif isinstance(v, list):
        out.append('["arr",[')
        for i, e in enumerate(v):
            if i:
                out.append(",")
            _encode(e, depth + 1, out)
        out.append("]]")
    elif isinstance(v, dict):
        out.append('["obj",[')
        for i, k in enumerate(sorted(v, key=lambda k: k.encode("utf-8"))):
            if i:
                out.append(",")
            out.append("[" + _string(k) + ",")
            _encode(v[k], depth + 1, out)
            out.append("]")
        out.append("]]")
    else:
        raise CanonError("unsupported value %r" % (v,))


def encode(v):
    """The agl-canon/1 document of v, as text."""
    out = ['["' + CANON_VERSION + '",']
    _encode(v, 0, out)
    out.append("]")
    return "".join(out)


def digest(v):
    enc = encode(v)
    return "sha256:" + hashlib.sha256(enc.encode("utf-8")).hexdigest(), enc


def dumps(v):
    """Plain JSON text of an exact value (numbers as their exact literal)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, decimal.Decimal):
        tag, text = number(v)
        return text
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(dumps(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dumps(e) for k, e in v.items()) + "}"
    raise TypeError("cannot encode %r" % (v,))


def same_value(a, b):
    try:
        return encode(a) == encode(b)
    except CanonError:
        return False
