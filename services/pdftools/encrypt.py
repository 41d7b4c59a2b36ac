"""The `encrypt` step (and `options.encrypt`): AES-256 encryption (security handler
revision 6, PDF 2.0's), with the owner password, the user password (empty: the file
opens without one) and the permissions granted to the user; the rest are withheld."""

from __future__ import annotations

import pikepdf

from services.core.model.pageoptions import Encrypt
from services.pdftools.document import Document

_GRANTS = {
    "print": ("print_lowres",),
    "print_high": ("print_lowres", "print_highres"),
    "copy": ("extract",),
    "annotate": ("modify_annotation",),
    "fill_forms": ("modify_form",),
    "assemble": ("modify_assembly",),
    "modify": ("modify_other",),
}
"""Each public permission (`finishingoptions.PERMISSIONS`) as pikepdf's flags."""
_NONE = {flag: False for flags in _GRANTS.values() for flag in flags}


def permissions(granted: list[str]) -> pikepdf.Permissions:
    flags = dict(_NONE)
    for name in granted:
        flags.update(dict.fromkeys(_GRANTS.get(name, ()), True))
    return pikepdf.Permissions(**flags)


def apply(doc: Document, crypt: Encrypt) -> None:
    """`doc` is written encrypted from now on (its owner password opens it again)."""
    doc.pdf()  # written again, now with the encryption
    doc.encryption = pikepdf.Encryption(
        owner=crypt.owner_password,
        user=crypt.user_password,
        R=6,
        allow=permissions(crypt.permissions),
    )
