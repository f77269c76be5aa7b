"""The outbound guard (docs/rules.md, Outbound guard): where an account's agents may dial, and its kill switch.

An account's settings are an `outbound.set` record on the accounts topic; a pause and its resume are records
there too (`outbound.paused`, `outbound.resumed`). The edge stamps the account's settings, pause included, on
each outbound `call.started` it appends (`CallStarted.outbound`), so a refold or a rebuild answers every
outbound start as it was answered.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from domain.alerts import Alert, make_alert
from domain.ids import derived_event_id
from domain.times import parse_ms

OUTBOUND_SET = "outbound.set"
OUTBOUND_PAUSED = "outbound.paused"
OUTBOUND_RESUMED = "outbound.resumed"
OUTBOUND_KINDS = (OUTBOUND_SET, OUTBOUND_PAUSED, OUTBOUND_RESUMED)
PAUSE_ON = ("critical", "off")
# The alerts that pause an account's outbound while its `pause_on` is `critical`: spend running away on an
# outbound number, and traffic pumping.
PAUSE_CAUSES = ("number.spend_exceeded", "outbound.destination_burst")
# The reasons an account's own settings give an outbound start: they say what it allows, not what the dialled
# number is, so such a start's score never becomes that number's history.
SETTINGS_REASONS = frozenset({"destination_not_allowed", "transfer_not_allowed", "outbound_paused"})
# Entries an account's transfer list may hold.
MAX_TRANSFER = 100
MAX_COUNTRIES = 250
_COUNTRY = re.compile(r"^[A-Z]{2}$")
# An exact number or a prefix of one: `+`, a country code's first digit, then up to 14 digits.
_E164_PREFIX = re.compile(r"^\+[1-9][0-9]{0,14}$")


class OutboundError(Exception):
    """Settings the contract refuses: `invalid_field`, naming the field."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class Paused(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pause in force: the alert that caused it, on which number, and when it was raised."""

    alert_id: str
    cause: str
    number: str
    at: str


class Outbound(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One account's outbound settings and its pause; absent parts are the defaults."""

    # The countries its agents may dial (ISO 3166 alpha-2); None for those of its protected numbers.
    countries: list[str] | None = None
    # Exact E.164 numbers and E.164 prefixes a transfer may go to; empty allows no transfer.
    transfer: list[str] = []
    pause_on: str = "critical"
    paused: Paused | None = None

    @property
    def default(self) -> bool:
        return self.countries is None and not self.transfer and self.pause_on == "critical" and self.paused is None


def parse_settings(body: Any, before: Outbound | None) -> Outbound:
    """`{"countries": [...] | null, "transfer": [...], "pause_on": "critical" | "off"}` laid over the settings
    before; a part left out keeps its value, `countries: null` goes back to the protected numbers' countries.
    The pause is not a setting: only a resume ends it."""
    if not isinstance(body, dict):
        raise OutboundError("outbound")
    for name in body:
        if name not in ("countries", "transfer", "pause_on"):
            raise OutboundError(name)
    current = before or Outbound()
    countries = current.countries
    if "countries" in body:
        countries = None if body["countries"] is None else _countries(body["countries"])
    transfer = current.transfer if "transfer" not in body else _transfer(body["transfer"])
    pause_on = body.get("pause_on", current.pause_on)
    if pause_on not in PAUSE_ON:
        raise OutboundError("pause_on")
    return Outbound(countries=countries, transfer=transfer, pause_on=pause_on, paused=current.paused)


def _countries(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_COUNTRIES:
        raise OutboundError("countries")
    found = set()
    for item in value:
        code = item.strip().upper() if isinstance(item, str) else ""
        if not _COUNTRY.match(code):
            raise OutboundError("countries")
        found.add(code)
    return sorted(found)


def _transfer(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_TRANSFER:
        raise OutboundError("transfer")
    found = set()
    for item in value:
        entry = re.sub(r"[\s().-]", "", item) if isinstance(item, str) else ""
        if not _E164_PREFIX.match(entry):
            raise OutboundError("transfer")
        found.add(entry)
    return sorted(found)


def settings_record(settings: Outbound) -> dict[str, Any]:
    """What `outbound.set` carries: the settings, never the pause (its own records say that)."""
    return {"countries": settings.countries, "transfer": list(settings.transfer), "pause_on": settings.pause_on}


def settings_body(settings: Outbound | None) -> dict[str, Any]:
    """The settings in effect, as `callscreen outbound show`, the dashboard and a set print them."""
    found = settings or Outbound()
    return {
        **settings_record(found),
        "paused": None if found.paused is None else msgspec.to_builtins(found.paused),
    }


def evolve(settings: Outbound | None, record: dict[str, Any]) -> Outbound | None:
    """The account's settings after one of the records above (None while they are all defaults)."""
    current = settings or Outbound()
    kind = record.get("kind")
    if kind == OUTBOUND_SET:
        given = record["outbound"]
        after = Outbound(
            countries=given.get("countries"),
            transfer=list(given.get("transfer") or []),
            pause_on=given.get("pause_on", "critical"),
            paused=current.paused,
        )
    elif kind == OUTBOUND_PAUSED:
        if current.paused is not None:
            # Paused already: the first cause stands until a resume.
            return settings
        after = msgspec.structs.replace(current, paused=msgspec.convert(record["paused"], Paused))
    elif kind == OUTBOUND_RESUMED:
        after = msgspec.structs.replace(current, paused=None)
    else:
        return settings
    return None if after.default else after


def pauses(settings: Outbound | None, alert_type: str, data: dict[str, Any]) -> bool:
    """Whether an alert pauses the account's outbound: a cause on an outbound number, with the switch on
    and no pause in force."""
    current = settings or Outbound()
    if current.pause_on != "critical" or current.paused is not None or alert_type not in PAUSE_CAUSES:
        return False
    return alert_type == "outbound.destination_burst" or data.get("direction") == "outbound"


def pause_record(account_id: str, alert_id: str, alert_type: str, number: str, at: str) -> dict[str, Any]:
    """The `outbound.paused` record an alert makes: its id from the alert's, so a refold appends the same."""
    paused = Paused(alert_id=alert_id, cause=alert_type, number=number, at=at)
    return {
        "kind": OUTBOUND_PAUSED,
        "id": derived_event_id(OUTBOUND_PAUSED, account_id, alert_id),
        "account_id": account_id,
        "at": at,
        "paused": msgspec.to_builtins(paused),
    }


class KillSwitch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What the alerts fold keeps of an account: its settings and pause as its accounts records say (and as
    the pause it appended says before that record comes back), and when it last raised `outbound.paused`."""

    settings: Outbound | None = None
    alerted_at: int | None = None


class Tripped(msgspec.Struct, frozen=True, gc=False):
    state: KillSwitch
    record: dict[str, Any]
    # None within the cooldown of the last one (decisions section 9): the pause holds all the same.
    alert: Alert | None


def trip(state: KillSwitch | None, alert: Alert, cooldown_ms: int) -> Tripped | None:
    """What an alert does to the account's kill switch: None, or the pause record to append, the switch as
    it stands after it, and the one `outbound.paused` alert."""
    current = state or KillSwitch()
    if not pauses(current.settings, alert.type, alert.data):
        return None
    at = parse_ms(alert.created_at) or 0
    number = str(alert.data.get("number", ""))
    record = pause_record(alert.account_id, alert.id, alert.type, number, alert.created_at)
    settings = evolve(current.settings, record)
    if current.alerted_at is not None and at - current.alerted_at < cooldown_ms:
        return Tripped(KillSwitch(settings=settings, alerted_at=current.alerted_at), record, None)
    data = {"number": number, "cause": alert.type, "alert_id": alert.id}
    paused = make_alert(alert.account_id, OUTBOUND_PAUSED, alert.account_id, at, at, data)
    return Tripped(KillSwitch(settings=settings, alerted_at=at), record, paused)


def folded(state: KillSwitch | None, record: dict[str, Any]) -> KillSwitch:
    """The kill switch after one of the account's outbound records."""
    current = state or KillSwitch()
    return KillSwitch(settings=evolve(current.settings, record), alerted_at=current.alerted_at)
