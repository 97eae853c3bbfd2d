"""The closed subset of JSON Schema that types operation inputs
(docs/agl-binding.md section 2): type, properties, required, items, enum,
default, minLength/maxLength, minItems/maxItems, minimum/maximum and
x-agl-handle. Objects are closed; defaults are materialized."""

import decimal

import canon

KEYWORDS = {"type", "properties", "required", "items", "enum", "default", "minLength", "maxLength",
            "minItems", "maxItems", "minimum", "maximum", "x-agl-handle"}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


class TypeError_(ValueError):
    pass


def _num(v):
    return decimal.Decimal(v) if not isinstance(v, bool) else None


def check(t, path="/"):
    """Validate a type declaration at registration."""
    if not isinstance(t, dict):
        raise TypeError_("%s: a type is an object" % path)
    unknown = set(t) - KEYWORDS
    if unknown:
        raise TypeError_("%s: unknown keywords %s" % (path, sorted(unknown)))
    if t.get("type") not in TYPES:
        raise TypeError_("%s: unsupported type %r" % (path, t.get("type")))
    if "x-agl-handle" in t and (t["type"] != "string" or "default" in t):
        raise TypeError_("%s: a handle is a string without default" % path)
    if t["type"] == "object":
        props = t.get("properties", {})
        if not isinstance(props, dict):
            raise TypeError_("%s: properties must be an object" % path)
        for r in t.get("required", []):
            if r not in props:
                raise TypeError_("%s: required member %r is not declared" % (path, r))
        for k, p in props.items():
            check(p, path.rstrip("/") + "/" + k)
    if t["type"] == "array":
        if "items" not in t:
            raise TypeError_("%s: an array needs items" % path)
        check(t["items"], path.rstrip("/") + "/items")
    if "default" in t:
        materialize(t, t["default"], path + "(default)", None)


def handles_of(t):
    """Top-level handle arguments: {"/name": kind}."""
    return {"/" + k: p["x-agl-handle"] for k, p in t.get("properties", {}).items() if "x-agl-handle" in p}


def materialize(t, v, path, handles, segs=()):
    """Validate v against t, filling absent members that have a default.
    handles collects (segments, kind, value) of every handle met."""
    ty = t["type"]
    where = path or "/"
    if ty == "object":
        if not isinstance(v, dict):
            raise TypeError_("%s: expected object" % where)
        props = t.get("properties", {})
        for k in v:
            if k not in props:
                raise TypeError_("%s: unknown member %r" % (where, k))
        out = {}
        for k in sorted(props):
            p = props[k]
            if k in v:
                val = v[k]
            elif "default" in p:
                val = p["default"]
            elif k in t.get("required", []):
                raise TypeError_("%s: missing required member %r" % (where, k))
            else:
                continue
            out[k] = materialize(p, val, path + "/" + k, handles, segs + (k,))
        return out
    if ty == "array":
        if not isinstance(v, list):
            raise TypeError_("%s: expected array" % where)
        if "minItems" in t and len(v) < t["minItems"]:
            raise TypeError_("%s: fewer than %s items" % (where, t["minItems"]))
        if "maxItems" in t and len(v) > t["maxItems"]:
            raise TypeError_("%s: more than %s items" % (where, t["maxItems"]))
        return [materialize(t["items"], e, "%s/%d" % (path, i), handles, segs + (i,)) for i, e in enumerate(v)]
    if ty == "string":
        if not isinstance(v, str):
            raise TypeError_("%s: expected string" % where)
        if "minLength" in t and len(v) < t["minLength"]:
            raise TypeError_("%s: shorter than %s" % (where, t["minLength"]))
        if "maxLength" in t and len(v) > t["maxLength"]:
            raise TypeError_("%s: longer than %s" % (where, t["maxLength"]))
        if "enum" in t and v not in t["enum"]:
            raise TypeError_("%s: %r is not one of %s" % (where, v, t["enum"]))
        if "x-agl-handle" in t and handles is not None:
            handles.append((segs, t["x-agl-handle"], v))
        return v
    if ty in ("integer", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, decimal.Decimal)):
            raise TypeError_("%s: expected %s" % (where, ty))
        try:
            tag, text = canon.number(v)
        except canon.CanonError as e:
            raise TypeError_("%s: %s" % (where, e))
        if ty == "integer" and tag != "int":
            raise TypeError_("%s: expected integer" % where)
        if "minimum" in t and decimal.Decimal(text) < _num(t["minimum"]):
            raise TypeError_("%s: below minimum" % where)
        if "maximum" in t and decimal.Decimal(text) > _num(t["maximum"]):
            raise TypeError_("%s: above maximum" % where)
        return v
    if ty == "boolean":
        if not isinstance(v, bool):
            raise TypeError_("%s: expected boolean" % where)
        return v
    raise TypeError_("%s: unsupported type" % where)


def pointer(v, ptr):
    """The value at an RFC 6901 pointer, or (None, False)."""
    if ptr == "":
        return v, True
    if not ptr.startswith("/"):
        return None, False
    for raw in ptr[1:].split("/"):
        seg = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(v, dict) and seg in v:
            v = v[seg]
        elif isinstance(v, list) and seg.isdigit() and int(seg) < len(v):
            v = v[int(seg)]
        else:
            return None, False
    return v, True


def set_path(v, segs, nv):
    if not segs:
        return nv
    v[segs[0]] = set_path(v[segs[0]], segs[1:], nv)
    return v
