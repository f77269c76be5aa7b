"""Platform adapters (docs/decisions.md, section 16): one pure parser per voice-agent platform, from the
platform's own webhook payload to the bodies `POST /v1/events` takes.

`PARSERS[platform](payload)` gives the bodies in the order they are appended (start, backfilled turns by
their time, end), each then checked by `domain.validation.parse_event` like any client's, or `Ignored`
for a payload that maps to no event; a payload that is not the platform's shape raises
`InputError("invalid_payload", field=<the missing field>)`. Twilio's payload is its form as
`dict[str, str]`; every other platform's is its decoded JSON.

Transcript text goes only into a turn body's `text`, which validation measures and drops; summaries,
recording URLs and other free text are never copied into a body.
"""

from __future__ import annotations

from domain.adapters import bland, elevenlabs, livekit, retell, twilio, vapi
from domain.adapters.base import IGNORED, NOT_A_CALL_EVENT, Body, Ignored, Parsed, Parser

PARSERS: dict[str, Parser] = {
    "vapi": vapi.parse,
    "retell": retell.parse,
    "twilio": twilio.parse,
    "livekit": livekit.parse,
    "bland": bland.parse,
    "elevenlabs": elevenlabs.parse,
}

__all__ = ["IGNORED", "NOT_A_CALL_EVENT", "PARSERS", "Body", "Ignored", "Parsed", "Parser"]
