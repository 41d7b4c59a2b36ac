"""What the OpenAPI schemas say beyond their types: each field's description, the values a
string option takes, and what each error type means.

A field is described where it is declared, by the string under it (an attribute
docstring, PEP 257's term, as Sphinx and pydantic read them):

    class Job(Answer, kw_only=True):
        id: str
        \"\"\"The job's id: 32 hex digits, or `<batch id>.<index>` for a batch's item.\"\"\"

msgspec keeps no such string at run time, so `field_docs` reads the class's source with
`ast`, through its bases (a request's fields are often its event Struct's). A field's
own `msgspec.Meta(description=…)` wins, as msgspec already wrote it. A string option whose
values are checked by `core/model/options.py` (not typed as a `Literal`, so events still
decode a newer value) gets those values as its `enum` from `VALUES`, the very tuples the
checks use.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from services.core.model import errors, errortypes, finishingoptions, options
from services.gateway.auth import SCOPES

VALUES: dict[tuple[str, str], tuple[object, ...]] = {
    ("OptionsRequest", "format"): tuple(sorted(options.PAPER_FORMATS)),
    ("OptionsRequest", "emulate_media"): options.MEDIA_TYPES,
    ("OptionsRequest", "output"): options.OUTPUTS,
    ("OptionsRequest", "receipt_width"): options.RECEIPT_WIDTHS,
    ("OptionsRequest", "pdfa"): finishingoptions.PDFA_LEVELS,
    ("FacturXRequest", "profile"): finishingoptions.FACTURX_PROFILES,
    ("EncryptRequest", "permissions"): finishingoptions.PERMISSIONS,
    ("MarkRequest", "position"): options.MARK_POSITIONS,
    ("MediaFeatureRequest", "name"): tuple(options.MEDIA_FEATURES),
    ("KeyRequest", "scopes"): SCOPES,
    ("Key", "scopes"): SCOPES,
    ("KeyCreated", "scopes"): SCOPES,
}
"""The values a field takes, by (schema, field): for a list, the values of its items."""

ERROR_TYPE_REFS: tuple[tuple[str, str], ...] = (("AttemptFailure", "type"),)
"""Fields typed `str` in their Struct (read back from storage, where an unknown value must
not fail the read) that answers fill from `ErrorType`."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstring of each field of `cls` and of its bases (a subclass's own
    string wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not issubclass(klass, msgspec.Struct) or klass is msgspec.Struct:
            continue
        docs.update(_own_docs(klass))
    return docs


def _own_docs(klass: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):  # no source (a built-in, a frozen module)
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for field, after in zip(body.body, body.body[1:], strict=False):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        value = after.value if isinstance(after, ast.Expr) else None
        text = value.value if isinstance(value, ast.Constant) else None
        if isinstance(text, str):
            docs[field.target.id] = " ".join(inspect.cleandoc(text).split())
    return docs


def named_types(types: Iterable[Any]) -> dict[str, type]:
    """Every Struct and Enum class that `types` use, at any depth, by schema name."""
    found: dict[str, type] = {}
    for info in _walk(msgspec.inspect.multi_type_info(list(types)), set()):
        if isinstance(info, (msgspec.inspect.StructType, msgspec.inspect.EnumType)):
            found[info.cls.__name__] = info.cls
    return found


def _walk(infos: Iterable[Any], seen: set[int]) -> Iterator[Any]:
    for info in infos:
        if id(info) in seen:
            continue
        seen.add(id(info))
        yield info
        yield from _walk(_children(info), seen)


def _children(info: Any) -> list[Any]:
    if isinstance(info, msgspec.inspect.StructType):
        return [field.type for field in info.fields]
    children: list[Any] = []
    for name in ("types", "item_type", "key_type", "value_type", "item_types"):
        value = getattr(info, name, None)
        if isinstance(value, tuple):
            children.extend(value)
        elif value is not None:
            children.append(value)
    return children


def describe(schemas: dict[str, Any], types: Iterable[Any], ref: str) -> None:
    """Fill in, in place, each Struct schema's field descriptions and values, the error
    type's meanings, and the fields that take an `ErrorType`."""
    for name, cls in named_types(types).items():
        schema = schemas.get(name)
        if schema is None:
            continue
        if issubclass(cls, msgspec.Struct):
            _describe_fields(name, schema, field_docs(cls))
            _describe_tag(schema, cls)
    if "ErrorType" in schemas:
        schemas["ErrorType"]["description"] = error_types_text()
        for name, field in ERROR_TYPE_REFS:
            if name in schemas:
                schemas[name]["properties"][field] = {
                    "$ref": ref.format(name="ErrorType"),
                    "description": schemas[name]["properties"][field].get("description", ""),
                }


def _describe_fields(name: str, schema: dict[str, Any], docs: dict[str, str]) -> None:
    for field, prop in schema.get("properties", {}).items():
        if "description" not in prop and field in docs:
            prop["description"] = docs[field]
        values = VALUES.get((name, field))
        if values is not None:
            _with_values(prop, list(values))


def _describe_tag(schema: dict[str, Any], cls: type[msgspec.Struct]) -> None:
    """The tag of a tagged Struct (a PDF step's `step`) says which kind it is."""
    config = cls.__struct_config__
    tag = schema.get("properties", {}).get(config.tag_field or "")
    if tag is not None and "description" not in tag:
        tag["description"] = f"`{config.tag}`: which {config.tag_field} this is"


def _with_values(prop: dict[str, Any], values: list[object]) -> None:
    """Put `enum` on the non-null branch of `prop` (on its items, for a list)."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") == "null":
            continue
        target = branch.get("items", branch) if branch.get("type") == "array" else branch
        target["enum"] = values


def error_types_text() -> str:
    """`ErrorType`'s description: its docstring's first paragraph, then each value with
    what it means (the error class's docstring, or `OTHER_TYPES`)."""
    head = inspect.cleandoc(errortypes.ErrorType.__doc__ or "").split("\n\n")[0]
    lines = [" ".join(head.split()), ""]
    meanings = dict(_class_meanings())
    meanings.update({str(k): v for k, v in errortypes.OTHER_TYPES.items()})  # they win
    for member in errortypes.ErrorType:
        lines.append(f"- `{member}`: {meanings[str(member)]}")
    return "\n".join(lines)


def _class_meanings() -> Iterator[tuple[str, str]]:
    """(kind, the first paragraph of its class's docstring) for every error class, the
    first class of a kind winning."""
    waiting: list[type[errors.PressroomError]] = [errors.PressroomError]
    seen: set[str] = set()
    while waiting:
        cls = waiting.pop(0)
        waiting.extend(cls.__subclasses__())
        if cls.kind in seen:
            continue
        seen.add(cls.kind)
        text = " ".join(inspect.cleandoc(cls.__doc__ or cls.__name__).split("\n\n")[0].split())
        yield str(cls.kind), text
