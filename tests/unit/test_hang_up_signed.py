"""Hang-ups only for CallSids the carrier signed, with that number's credentials (docs/api.md, Hanging
up): the gate's mark (domain.gate.hang_up_account), the fold of a platform's report and the gate's,
whose credentials the alerting role uses (alerting.carrier.hang_up_credentials), and the dashboard's
token field (ingest.dashboard_pages.carrier_token_given)."""

from __future__ import annotations

import msgspec
import pytest

from alerting.carrier import Credentials, hang_up_credentials
from domain import gate
from domain.calls import CallState
from domain.events import CallStarted
from domain.features import FeatureView
from domain.store import MemoryStore
from domain.validation import Stamp, TimeBounds, parse_event
from ingest.dashboard import PageError
from ingest.dashboard_pages import carrier_token_given
from tests.unit.test_gate import AT, CALLER, NUMBER, RULES, barge, fold, gated_start

NUMBER_SID = "AC" + "2" * 32
DEPLOYMENT_SID = "AC" + "1" * 32
DEPLOYMENT = Credentials(DEPLOYMENT_SID, "deployment-token")


@pytest.mark.parametrize(
    ("form", "signed", "wanted", "account"),
    [
        ({"AccountSid": NUMBER_SID}, True, True, NUMBER_SID),
        # Unsigned (no carrier auth token on the number): the form could name anybody's call.
        ({"AccountSid": NUMBER_SID}, False, True, None),
        ({"AccountSid": NUMBER_SID}, True, False, None),
        ({}, True, True, None),
        # It goes into the REST API's path: anything but an account id is none.
        ({"AccountSid": "AC" + "2" * 31}, True, True, None),
        ({"AccountSid": f"{NUMBER_SID}/../x"}, True, True, None),
        ({"AccountSid": "XX" + "2" * 32}, True, True, None),
    ],
)
def test_only_a_signed_form_names_the_carrier_account_to_ask(
    form: dict[str, str], signed: bool, wanted: bool, account: str | None
) -> None:
    assert gate.hang_up_account(form, signed, wanted) == account


@pytest.mark.parametrize(
    ("account_sid", "number_token", "own", "expected"),
    [
        # The number's own: the signed form's account with the number's token, whatever the deployment's.
        (NUMBER_SID, "number-token", DEPLOYMENT, Credentials(NUMBER_SID, "number-token")),
        (DEPLOYMENT_SID, "number-token", DEPLOYMENT, Credentials(DEPLOYMENT_SID, "number-token")),
        (NUMBER_SID, "number-token", None, Credentials(NUMBER_SID, "number-token")),
        # The number's token gone since: the deployment's only for the deployment's own account.
        (DEPLOYMENT_SID, "", DEPLOYMENT, DEPLOYMENT),
        (NUMBER_SID, "", DEPLOYMENT, None),
        (DEPLOYMENT_SID, "", None, None),
        # No signed account (an alert from before hang-ups needed one): nobody is asked.
        ("", "number-token", DEPLOYMENT, None),
        ("", "", DEPLOYMENT, None),
    ],
)
def test_a_hang_up_uses_the_numbers_credentials_and_the_deployments_only_for_its_own_account(
    account_sid: str, number_token: str, own: Credentials | None, expected: Credentials | None
) -> None:
    assert hang_up_credentials(account_sid, number_token, own) == expected


def test_a_token_is_never_in_the_credentials_repr() -> None:
    assert "number-token" not in repr(Credentials(NUMBER_SID, "number-token"))


@pytest.mark.parametrize(
    ("form", "given"),
    [
        ({}, None),
        ({"carrier_auth_token": ""}, None),
        ({"carrier_auth_token": "  "}, None),
        ({"carrier_auth_token": " tok "}, "tok"),
        ({"carrier_auth_token": "", "carrier_auth_token_clear": "on"}, ""),
    ],
)
def test_the_dashboards_token_field_keeps_replaces_or_clears(form: dict[str, str], given: str | None) -> None:
    assert carrier_token_given(form) == given


def test_the_dashboard_refuses_a_new_token_and_clear_together() -> None:
    with pytest.raises(PageError) as refused:
        carrier_token_given({"carrier_auth_token": "tok", "carrier_auth_token_clear": "on"})
    assert refused.value.status == 400


def platform_start(provider_call_id: str) -> CallStarted:
    body = {"type": "call.started", "call_id": "plat-1", "provider_call_id": provider_call_id, "to": NUMBER}
    started = parse_event({**body, "from": CALLER}, Stamp("ev-p", "acct_x", "guard", AT), TimeBounds.of(RULES.limits))
    assert isinstance(started, CallStarted)
    return started


@pytest.mark.parametrize(("provider_call_id", "ended"), [("CA01", True), ("CA99", False)])
def test_a_platform_report_first_keeps_the_hang_up_to_the_signed_call_sid(provider_call_id: str, ended: bool) -> None:
    """The platform's start came first; the gate's signed start for CallSid CA01 merges in. Only a record
    whose carrier id is that CallSid is ended (under the signed form's account)."""
    view = FeatureView(MemoryStore(), RULES.scoring)
    state = fold(None, platform_start(provider_call_id), view).state
    signed = msgspec.structs.replace(gated_start("ev-1"), hang_up=True, carrier_account_sid=NUMBER_SID)
    merged = fold(state, signed, view).state
    assert isinstance(merged, CallState)
    assert (merged.hang_up, merged.carrier_account_sid) == ((True, NUMBER_SID) if ended else (False, None))
    raised = []
    for n in range(7):
        outcome = fold(merged, msgspec.structs.replace(barge(f"ev-b{n}", n), call_id="plat-1"), view)
        merged = outcome.state or merged
        raised += outcome.alerts
    (alert,) = raised
    assert (alert.hang_up, alert.carrier_account_sid) == (("CA01", NUMBER_SID) if ended else (None, None))
    assert alert.data.get("hung_up") is (True if ended else None)
