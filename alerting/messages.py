"""What an email, a text and a voice call say about an alert (docs/api.md, Alert channels).

The type, the severity, the numbers involved, the time and a link to the alert in the dashboard; never a
secret, and there are no transcript words to leak. Email is rendered from the Jinja2 templates beside this
module (text and HTML); a text is at most 160 characters; a voice call says the alert twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

import jinja2

from domain.times import parse_ms

TEXT_MAX = 160
TEMPLATES = Path(__file__).parent / "templates"
_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
# Fields of an alert's `data` that name a phone number, in the order they are shown.
NUMBER_FIELDS = ("number", "caller", "numbers", "callers")
# What the owner must do about an alert that stops something until they act, in the email and the voice call.
ACTIONS = {
    "outbound.paused": "Every outbound call of the account is rejected until you resume outbound calls on the"
    " dashboard's Outbound page.",
    "outbound.destination_burst": "Outbound calls are going to many numbers of one range: traffic pumping."
    " Check the agent's calls.",
}


@dataclass(frozen=True)
class About:
    """The facts every message states, already formatted."""

    id: str
    type: str
    severity: str
    numbers: list[str]
    time: str
    link: str
    action: str | None = None


def numbers_in(data: dict[str, Any]) -> list[str]:
    """The phone numbers an alert names, each once, in a stable order."""
    found: list[str] = []
    for name in NUMBER_FIELDS:
        value = data.get(name)
        values = value if isinstance(value, list) else [value] if value else []
        for number in values:
            if isinstance(number, str) and number not in found:
                found.append(number)
    return found


def about(alert: dict[str, Any], dashboard: str) -> About:
    """`dashboard` is the dashboard's base URL; the link opens the alert there."""
    created = parse_ms(alert.get("created_at"))
    when = str(alert.get("created_at", ""))
    if created is not None:
        when = f"{when[:10]} {when[11:16]} UTC"
    return About(
        id=alert["id"],
        type=alert["type"],
        severity=alert["severity"],
        numbers=numbers_in(alert.get("data") or {}),
        time=when,
        link=f"{dashboard.rstrip('/')}/dashboard/alerts/{quote(alert['id'], safe='')}",
        action=ACTIONS.get(alert["type"]),
    )


def subject(a: About) -> str:
    where = f" on {a.numbers[0]}" if a.numbers else ""
    return f"[Callscreen] {a.severity}: {a.type}{where}"


def email(a: About, sender: str, to: str) -> EmailMessage:
    """A multipart/alternative message: the plain text first, the HTML second."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject(a)
    message.set_content(_env.get_template("alert.txt").render(alert=a))
    message.add_alternative(_env.get_template("alert.html").render(alert=a), subtype="html")
    return message


def text(a: About) -> str:
    """At most 160 characters; the link is kept whole and the numbers give way first."""
    head = f"Callscreen {a.severity}: {a.type}"
    tail = f" {a.time} {a.link}"
    numbers = ""
    for number in a.numbers:
        longer = f"{numbers} {number}"
        if len(head) + len(longer) + len(tail) > TEXT_MAX:
            break
        numbers = longer
    body = head + numbers + tail
    return body if len(body) <= TEXT_MAX else (head + tail)[: TEXT_MAX - 1] + "…"


def spoken(a: About) -> str:
    """Words for a voice: the type's dots read as spaces, the numbers digit by digit."""
    kind = a.type.replace(".", " ").replace("_", " ")
    numbers = ", ".join(" ".join(n.lstrip("+")) for n in a.numbers[:3])
    about_numbers = f" about {numbers}" if numbers else ""
    action = f" {a.action}" if a.action else ""
    return f"Callscreen {a.severity} alert: {kind}{about_numbers}, at {a.time}.{action}"


def voice_twiml(a: About) -> str:
    """Inline TwiML for the carrier's calls API: the alert, said twice."""
    said = escape(spoken(a))
    say = f"<Say>{said}</Say>"
    return f'<?xml version="1.0" encoding="UTF-8"?><Response>{say}<Pause length="1"/>{say}</Response>'
