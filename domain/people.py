"""People who sign in to the dashboard, and their sessions (docs/dashboard.md): records on the accounts
topic, folded like keys. Only digests reach the topic: of setup links and session tokens, and the
password's argon2id hash (made by the edge; the domain never sees a password).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from domain import ids
from domain.times import format_ms, parse_ms

ROLES = ("owner", "viewer")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
SETUP_PREFIX = "cs_setup_"
SESSION_PREFIX = "cs_sess_"


@dataclass(frozen=True)
class Person:
    person_id: str
    account_id: str
    email: str
    role: str
    setup_digest: str = ""
    setup_until: int = 0
    password_hash: str = ""

    @property
    def can_change(self) -> bool:
        return self.role == "owner"


@dataclass(frozen=True)
class Session:
    person_id: str
    account_id: str
    started_at: int


@dataclass
class PeopleView:
    """Every person and live session, with the lookups sign-in and each page need."""

    people: dict[str, Person] = field(default_factory=dict)
    by_email: dict[str, str] = field(default_factory=dict)
    by_setup: dict[str, str] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)

    def person_by_email(self, email: str) -> Person | None:
        person_id = self.by_email.get(email.strip().lower())
        return self.people.get(person_id) if person_id else None

    def person_by_setup(self, link_token: str, now_ms: int) -> Person | None:
        """The person a setup link is for, while the link is theirs, unused and not expired."""
        person_id = self.by_setup.get(ids.digest(link_token))
        person = self.people.get(person_id) if person_id else None
        if person is None or not ids.same_digest(person.setup_digest, ids.digest(link_token)):
            return None
        return person if now_ms < person.setup_until else None

    def session(self, token: str) -> tuple[Session, Person] | None:
        found = self.sessions.get(ids.digest(token))
        if found is None:
            return None
        person = self.people.get(found.person_id)
        return (found, person) if person is not None else None


def normal_email(email: str) -> str | None:
    email = email.strip().lower()
    return email if len(email) <= 254 and EMAIL.fullmatch(email) else None


def new_person_id() -> str:
    return "prs_" + ids.random_base62(16)


def new_setup_token() -> str:
    return SETUP_PREFIX + ids.random_base62(32)


def new_session_token() -> str:
    return SESSION_PREFIX + ids.random_base62(32)


def invited(
    account_id: str, email: str, role: str, link_token: str, now_ms: int, valid_ms: int, person_id: str = ""
) -> dict[str, Any]:
    """The record of an invitation (or a fresh setup link for someone already invited), the link working
    for `valid_ms`."""
    return {
        "kind": "person.invited",
        "account_id": account_id,
        "person_id": person_id or new_person_id(),
        "email": email,
        "role": role,
        "setup_digest": ids.digest(link_token),
        "setup_until": format_ms(now_ms + valid_ms),
    }


def fold(view: PeopleView, record: dict[str, Any]) -> None:
    """One accounts-topic record into the people view; records of other kinds change nothing."""
    kind = record.get("kind")
    person = view.people.get(str(record.get("person_id")))
    if kind == "person.invited":
        before = person
        person = Person(
            person_id=record["person_id"],
            account_id=record["account_id"],
            email=record["email"],
            role=record["role"],
            setup_digest=record["setup_digest"],
            setup_until=parse_ms(record["setup_until"]) or 0,
            password_hash=before.password_hash if before else "",
        )
        if before is not None:
            view.by_setup.pop(before.setup_digest, None)
        view.people[person.person_id] = person
        view.by_email[person.email] = person.person_id
        view.by_setup[person.setup_digest] = person.person_id
    elif kind == "person.password_set" and person is not None:
        view.by_setup.pop(person.setup_digest, None)
        view.people[person.person_id] = dataclasses.replace(
            person, password_hash=record["password_hash"], setup_digest="", setup_until=0
        )
    elif kind == "session.started" and person is not None:
        started = parse_ms(record.get("at")) or 0
        view.sessions[record["session_digest"]] = Session(person.person_id, person.account_id, started)
    elif kind == "session.ended":
        view.sessions.pop(str(record.get("session_digest")), None)
    elif kind == "sessions.ended" and person is not None:
        for digest in [d for d, s in view.sessions.items() if s.person_id == person.person_id]:
            del view.sessions[digest]
