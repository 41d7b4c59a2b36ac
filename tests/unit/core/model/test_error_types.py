"""`ErrorType`: the one list of `error.type` values that answers promise.

Verifies: every error class's `kind` is a member (a class added with a plain string would
send a type the OpenAPI document does not list); every member is some class's `kind` or
explained in `OTHER_TYPES`; a stored type no member has is shown as `internal`.
"""

from __future__ import annotations

from services.core.model import errors
from services.core.model.errors import PressroomError
from services.core.model.errortypes import OTHER_TYPES, ErrorType, known_type


def every_error_class() -> list[type[PressroomError]]:
    found: list[type[PressroomError]] = []
    waiting: list[type[PressroomError]] = [PressroomError]
    while waiting:
        cls = waiting.pop()
        found.append(cls)
        waiting.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_a_kind_of_the_enum():
    strays = [c.__name__ for c in every_error_class() if not isinstance(c.kind, ErrorType)]
    assert strays == []
    assert len(every_error_class()) > 30  # the walk found the tree, not one class


def test_every_member_is_a_kind_or_explained():
    kinds = {c.kind for c in every_error_class()}
    unexplained = set(ErrorType) - kinds - set(OTHER_TYPES)
    assert unexplained == set()
    assert kinds & set(OTHER_TYPES) == {ErrorType.INTERNAL}  # the base class's own


def test_a_stored_type_is_shown_as_its_member_and_an_unknown_one_as_internal():
    assert known_type("template") is ErrorType.TEMPLATE
    assert known_type("a-type-from-elsewhere") is ErrorType.INTERNAL
    assert known_type(None) is None
    assert errors.RequestError("m").kind == "validation"  # still its value as a string
