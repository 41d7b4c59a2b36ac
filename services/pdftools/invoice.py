"""A Factur-X invoice XML checked before anything embeds it: well-formed without a
DOCTYPE and rooted in CII's CrossIndustryInvoice (`finishingoptions.invoice_problem`, as
the gateway checks), its profile read from its own GuidelineSpecifiedDocumentContextParameter
and equal to the one declared, and valid against the Factur-X XSD of that profile.

The profile and the XSDs come from the `factur-x` package (the XSDs it ships are the
FNFE-MPE's); the XML is parsed here, by lxml with entities and network access off (the
DOCTYPE refusal already rules out entity expansion).
"""

from __future__ import annotations

import facturx
from lxml import etree

from services.core.model.errors import InvoiceInvalid
from services.core.model.finishingoptions import invoice_problem

PROFILES = {
    "minimum": "MINIMUM",
    "basicwl": "BASIC WL",
    "basic": "BASIC",
    "en16931": "EN 16931",
    "extended": "EXTENDED",
}
"""The factur-x package's level names and the profiles as the XMP's fx:ConformanceLevel
spells them."""
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def parsed(xml: str | bytes, where: str) -> etree._Element:
    """The XML's root; `InvoiceInvalid` naming `where` when it is not a CII invoice."""
    text = xml if isinstance(xml, str) else xml.decode("utf-8", "replace")
    problem = invoice_problem(text)
    if problem is not None:
        raise InvoiceInvalid(f"{where} {problem}")
    root: etree._Element = etree.fromstring(text.encode(), _PARSER)
    return root


def profile_of(root: etree._Element, where: str) -> str:
    """The profile the XML declares itself (`EN 16931`…)."""
    try:
        level = str(facturx.get_level(root, "factur-x"))
    except ValueError as exc:  # no GuidelineSpecifiedDocumentContextParameter, or unknown
        raise InvoiceInvalid(f"{where} has no Factur-X profile: {exc}") from None
    if level not in PROFILES:
        raise InvoiceInvalid(f"{where} has the profile {level!r}, which is not Factur-X 1.0's")
    return PROFILES[level]


def xsd_problem(root: etree._Element, profile: str) -> str | None:
    """Why the XML fails the Factur-X XSD of `profile` (None: it passes)."""
    level = next(key for key, name in PROFILES.items() if name == profile)
    try:
        facturx.xml_check_xsd(root, flavor="factur-x", level=level)
    except Exception as exc:  # the package raises bare Exception with lxml's as cause
        return str(exc.__cause__ or exc)
    return None


def checked(xml: str, declared: str | None, where: str) -> str:
    """The invoice's profile, after every check; `InvoiceInvalid` naming the first that
    fails (`where` names the field or file in the message)."""
    root = parsed(xml, where)
    profile = profile_of(root, where)
    if declared is not None and declared != profile:
        raise InvoiceInvalid(
            f"{where} is a Factur-X {profile} invoice (its GuidelineSpecifiedDocumentContext"
            f"Parameter) but the profile declared is {declared}"
        )
    problem = xsd_problem(root, profile)
    if problem is not None:
        raise InvoiceInvalid(f"{where} fails the Factur-X {profile} XSD: {problem}")
    return profile
