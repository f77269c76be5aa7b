"""TwiML, the carrier's answer language (docs/api.md, The carrier gate), made with the standard library.

Every answer on the gate's paths is one of these, errors included: the carrier reads XML, never JSON.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from aiohttp import web

CONTENT_TYPE = "application/xml"
APOLOGY = "We are sorry, the call cannot be connected right now. Goodbye."


def _document(root: ET.Element) -> bytes:
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


def response(root: ET.Element, status: int = 200) -> web.Response:
    return web.Response(body=_document(root), status=status, content_type=CONTENT_TYPE)


def reject(status: int = 200, reason: str | None = None) -> web.Response:
    """`<Response><Reject/></Response>`: the carrier refuses the call before anyone answers it."""
    root = ET.Element("Response")
    ET.SubElement(root, "Reject", {"reason": reason} if reason else {})
    return response(root, status)


def hang_up() -> web.Response:
    root = ET.Element("Response")
    ET.SubElement(root, "Hangup")
    return response(root)


def apology() -> web.Response:
    """A forward that failed: a short apology, then the call ends."""
    root = ET.Element("Response")
    ET.SubElement(root, "Say").text = APOLOGY
    ET.SubElement(root, "Hangup")
    return response(root)


def challenge(digit: str, action: str, timeout_s: int) -> web.Response:
    """One keypress, posted to `action` (the challenge path) whether or not the caller pressed anything."""
    root = ET.Element("Response")
    gather = ET.SubElement(
        root,
        "Gather",
        {
            "numDigits": "1",
            "timeout": str(timeout_s),
            "action": action,
            "method": "POST",
            "actionOnEmptyResult": "true",
        },
    )
    ET.SubElement(gather, "Say").text = f"To be connected, press {digit}."
    return response(root)


def empty() -> web.Response:
    """Nothing to do: the answer to a status callback."""
    return response(ET.Element("Response"))


def is_xml(body: bytes) -> bool:
    """Whether a forward's answer parses as XML (it is relayed as it came, never re-serialised)."""
    try:
        ET.fromstring(body)
    except ET.ParseError:
        return False
    return True
