"""People and sessions as plain rules (domain.people, domain.commands.invite_person), the dashboard's CSRF
tokens and sign-in limits (ingest.sessions), and its chart (ingest.chart)."""

from __future__ import annotations

import pytest

from domain import commands, ids
from domain.accounts import AccountsView, apply, stamp
from domain.people import Session
from domain.times import format_ms
from infra.settings import Settings
from ingest.chart import hourly_chart
from ingest.sessions import IdleClock, SignInLimits, csrf_for, csrf_ok

NOW = 1_795_000_000_000
SETUP_VALID_MS = Settings().setup_link_valid_ms
SESSION_IDLE_MS = Settings().session_idle_ms


def view_with_account() -> tuple[AccountsView, str]:
    view = AccountsView()
    created = commands.create_account("guard", "t")
    apply(view, stamp(created.record, NOW))
    return view, created.shown["account_id"]


def invite(view: AccountsView, account_id: str, email: str, role: str = "owner") -> dict[str, str]:
    change = commands.invite_person(view.accounts[account_id], view.people, email, role, NOW, SETUP_VALID_MS)
    apply(view, stamp(change.record, NOW))
    return change.shown


def test_a_setup_link_opens_once_and_only_for_a_day() -> None:
    view, account_id = view_with_account()
    shown = invite(view, account_id, "Ops@Example.com")
    assert shown["email"] == "ops@example.com"
    person = view.people.person_by_setup(shown["setup_token"], NOW)
    assert person is not None and person.account_id == account_id and person.role == "owner"
    assert view.people.person_by_setup(shown["setup_token"], NOW + SETUP_VALID_MS - 1) is not None
    assert view.people.person_by_setup(shown["setup_token"], NOW + SETUP_VALID_MS) is None
    assert view.people.person_by_setup(shown["setup_token"] + "x", NOW) is None
    record = {"kind": "person.password_set", "account_id": account_id, "person_id": person.person_id}
    apply(view, stamp({**record, "password_hash": "$argon2id$v=19$m=1$x$y"}, NOW))
    assert view.people.person_by_setup(shown["setup_token"], NOW) is None
    assert view.people.person_by_email(" OPS@example.com ") is not None


def test_a_new_invitation_replaces_the_old_link_and_an_email_belongs_to_one_account() -> None:
    view, account_id = view_with_account()
    first = invite(view, account_id, "ops@example.com")
    second = invite(view, account_id, "ops@example.com")
    assert first["person_id"] == second["person_id"]
    assert view.people.person_by_setup(first["setup_token"], NOW) is None
    assert view.people.person_by_setup(second["setup_token"], NOW) is not None
    other = commands.create_account("watch")
    apply(view, stamp(other.record, NOW))
    with pytest.raises(commands.Refused, match="email_taken"):
        invite(view, other.shown["account_id"], "ops@example.com")
    for email, role, code in (("nope", "owner", "invalid_email"), ("a@b.co", "admin", "invalid_role")):
        with pytest.raises(commands.Refused, match=code):
            invite(view, account_id, email, role)


def test_signing_out_everywhere_ends_every_session_of_that_person_only() -> None:
    view, account_id = view_with_account()
    ana = invite(view, account_id, "ana@example.com")["person_id"]
    bo = invite(view, account_id, "bo@example.com", "viewer")["person_id"]
    tokens = {name: f"cs_sess_{name}" for name in ("ana1", "ana2", "bo1")}
    for name, token in tokens.items():
        person = ana if name.startswith("ana") else bo
        record = {"kind": "session.started", "account_id": account_id, "person_id": person}
        apply(view, stamp({**record, "session_digest": ids.digest(token)}, NOW))
    found = view.people.session(tokens["bo1"])
    assert found is not None and not found[1].can_change
    apply(view, stamp({"kind": "sessions.ended", "account_id": account_id, "person_id": ana}, NOW))
    assert view.people.session(tokens["ana1"]) is None and view.people.session(tokens["ana2"]) is None
    assert view.people.session(tokens["bo1"]) is not None
    apply(
        view,
        stamp({"kind": "session.ended", "account_id": account_id, "session_digest": ids.digest("cs_sess_bo1")}, NOW),
    )
    assert view.people.session(tokens["bo1"]) is None


def test_a_session_idle_for_12_hours_is_over() -> None:
    clock = IdleClock(SESSION_IDLE_MS)
    session = Session("prs_x", "acct_x", NOW)
    assert clock.alive("t", session, NOW + SESSION_IDLE_MS - 1)
    assert clock.alive("t", session, NOW + 2 * SESSION_IDLE_MS - 2)
    assert not clock.alive("t", session, NOW + 3 * SESSION_IDLE_MS)


def test_csrf_tokens_belong_to_their_session() -> None:
    assert csrf_ok("cs_sess_a", csrf_for("cs_sess_a"))
    assert not csrf_ok("cs_sess_b", csrf_for("cs_sess_a"))
    assert not csrf_ok("cs_sess_a", None)
    assert not csrf_ok(None, csrf_for(""))


def test_sign_in_limits_count_every_try_per_email_and_failures_per_address() -> None:
    limits = SignInLimits(Settings())
    for _ in range(10):
        assert limits.take("a@x.com", "10.0.0.1") == 0.0
        limits.succeeded("10.0.0.1")
    assert limits.take("a@x.com", "10.0.0.2") > 0
    # The ten sign-ins gave the address its tries back; ten failures across emails spend them.
    assert [limits.take(f"p{n}@x.com", "10.0.0.1") for n in range(10)] == [0.0] * 10
    assert limits.take("b@x.com", "10.0.0.1") > 0
    assert limits.take("b@x.com", "10.0.0.4") == 0.0
    # A try that was never checked (no verify slot) counts against neither.
    limits.untried("b@x.com", "10.0.0.4")
    assert [limits.take("b@x.com", "10.0.0.4") for _ in range(10)] == [0.0] * 10


def test_sign_in_limits_are_the_settings() -> None:
    settings = Settings(
        sign_in_email_tries=3, sign_in_email_window_min=1.0, sign_in_address_tries=2, sign_in_address_window_min=2.0
    )
    limits = SignInLimits(settings)
    for _ in range(3):
        assert limits.take("a@x.com", "10.0.0.1") == 0.0
        limits.succeeded("10.0.0.1")
    # Past the limit the wait is one try's refill: a minute over 3 tries, two minutes over 2.
    assert limits.take("a@x.com", "10.0.0.1") == pytest.approx(20.0, abs=0.5)
    assert limits.take("b@x.com", "10.0.0.2") == 0.0
    assert limits.take("c@x.com", "10.0.0.2") == 0.0
    assert limits.take("d@x.com", "10.0.0.2") == pytest.approx(60.0, abs=0.5)
    # A try the email refuses does not spend the address's.
    assert limits.take("a@x.com", "10.0.0.3") > 0
    assert [limits.take(f"p{n}@x.com", "10.0.0.3") for n in range(2)] == [0.0, 0.0]


def test_the_chart_counts_calls_and_rejects_per_hour_and_ignores_older_ones() -> None:
    now = NOW - NOW % 3_600_000 + 1_800_000
    calls = [
        {"at": format_ms(now - 60_000), "action": "reject"},
        {"at": format_ms(now - 120_000), "action": "allow"},
        {"at": format_ms(now - 3_600_000), "action": "reject"},
        {"at": format_ms(now - 25 * 3_600_000), "action": "allow"},
    ]
    chart = hourly_chart(calls, now, 24)
    assert len(chart.bars) == 24
    assert [(b.calls, b.rejects) for b in chart.bars[-2:]] == [(1, 1), (2, 1)]
    assert (chart.total_calls, chart.total_rejects, chart.peak) == (3, 2, 2)
    assert chart.bars[-1].calls_height == 148.0 and chart.bars[-1].rejects_height == 74.0
